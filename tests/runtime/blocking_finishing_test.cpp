// The blocking pool's finishing_ count (src/runtime/blocking/blocking_pool.*):
// a pool thread that reported itself finishing counts as "back in a moment",
// and a job spawned while nobody is idle waits for it instead of starting a
// thread. So no user code may run on the thread after the report. It used
// to be made when the function returned, and user code still ran after it:
//  - the function as spawned (run_blocking's parameter), destroyed with the
//    frame: a capture that the move into a local had copied (a const one);
//  - a detached job's result, destroyed by complete()'s drop_output;
//  - a detached job's exception, given to Builder::on_unhandled_exception's
//    hook on that thread.
// Code there that waited for a blocking job it spawned waited for itself:
// the job counted on the very thread that waited. Now the report is made in
// complete(), just before the JoinHandle's wake-up. Each test spawns a job
// from such a place and waits (bounded by kNotHung) for it to run; all nine
// failed before (the inner job never ran).
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <utility>

#include <gtest/gtest.h>

#include "blocking_support.hpp"
#include "runtime_support.hpp"

namespace volt::test {
namespace {

using namespace std::chrono_literals;

class BlockingFinishingTest : public ::testing::TestWithParam<Flavour> {};

INSTANTIATE_TEST_SUITE_P(Flavours, BlockingFinishingTest,
                         ::testing::Values(kMultiThread1, kMultiThread2, kCurrentThread),
                         FlavourName());

// 0: not yet; 1: the inner job ran; 2: it did not run within kNotHung.
using Outcome = std::atomic<int>;

// Spawns a blocking job on `handle` and waits (bounded) for it to run.
void run_inner_job_and_wait(const Handle& handle, Outcome* outcome) {
  auto ran = std::make_shared<Gate>();
  (void)handle.spawn_blocking([ran] { ran->open(); });  // detached
  outcome->store(ran->wait() ? 1 : 2);
}

// A value whose destruction (once, not a moved-from one) runs an inner job.
class RunsJobOnDestroy {
 public:
  RunsJobOnDestroy(Handle handle, Outcome* outcome)
      : handle_(std::move(handle)), outcome_(outcome) {}
  RunsJobOnDestroy(RunsJobOnDestroy&& other) noexcept
      : handle_(other.handle_), outcome_(std::exchange(other.outcome_, nullptr)) {}
  RunsJobOnDestroy(const RunsJobOnDestroy&) = delete;
  RunsJobOnDestroy& operator=(const RunsJobOnDestroy&) = delete;
  RunsJobOnDestroy& operator=(RunsJobOnDestroy&&) = delete;
  ~RunsJobOnDestroy() {
    if (outcome_) run_inner_job_and_wait(handle_, outcome_);
  }

 private:
  Handle handle_;
  Outcome* outcome_;
};

bool settled(const Outcome& outcome) {
  // kNotHung for the inner wait, plus margin.
  return wait_until([&] { return outcome.load() != 0; }, kNotHung + 10s);
}

TEST_P(BlockingFinishingTest, DetachedJobWhoseResultDestructorRunsAnotherJob) {
  // The job's result is destroyed by the pool thread after it reported
  // itself finishing (drop_output in complete(): nobody joins). The
  // destructor's job finds nobody idle and finishing_ == 1, so no thread is
  // started for it, and the only thread is the one waiting for it.
  Runtime rt = make_runtime(GetParam());
  Outcome outcome{0};
  auto start = std::make_shared<Gate>();
  Handle handle = rt.handle();
  {
    JoinHandle<RunsJobOnDestroy> h = rt.spawn_blocking([start, handle, &outcome] {
      (void)start->wait();
      return RunsJobOnDestroy(handle, &outcome);
    });
  }  // detached while it runs: its result is the pool thread's to destroy
  start->open();
  ASSERT_TRUE(settled(outcome));
  EXPECT_EQ(outcome.load(), 1) << "the job spawned by the result's destructor never ran";
}

TEST_P(BlockingFinishingTest, ConstCaptureIsDestroyedAfterTheThreadReportsFinishing) {
  // run_blocking moves the function into a local so that its captures die
  // before finishing (7ac0130). A const capture is copied by that move, not
  // moved: the copy left in the coroutine parameter dies with the frame,
  // after finishing. Here it holds the last reference to an object whose
  // destructor runs another job. The JoinHandle is kept (no detach needed).
  Runtime rt = make_runtime(GetParam());
  Outcome outcome{0};
  auto start = std::make_shared<Gate>();
  std::optional<JoinHandle<void>> h;
  {
    const auto guard = std::make_shared<RunsJobOnDestroy>(rt.handle(), &outcome);
    h.emplace(rt.spawn_blocking([guard, start] { (void)start->wait(); }));
  }  // the job's function holds the last reference now
  start->open();
  ASSERT_TRUE(settled(outcome));
  EXPECT_EQ(outcome.load(), 1) << "the job spawned by the capture's destructor never ran";
  h->join();
}

TEST_P(BlockingFinishingTest, UnhandledExceptionHookMayRunABlockingJob) {
  // A detached job that throws: the hook runs on the pool thread, after the
  // job's scope reported it finishing. A hook that logs through the runtime
  // (a blocking job, or fs::append via Handle::block_on, which is a pool job
  // too) waits for a job that no thread will run.
  Outcome outcome{0};
  std::optional<Handle> handle;
  Runtime rt = make_builder(GetParam())
                   .on_unhandled_exception([&](const UnhandledException&) {
                     run_inner_job_and_wait(*handle, &outcome);
                   })
                   .build();
  handle = rt.handle();
  auto start = std::make_shared<Gate>();
  {
    JoinHandle<void> h = rt.spawn_blocking([start] {
      (void)start->wait();
      throw std::runtime_error("detached");
    });
  }
  start->open();
  ASSERT_TRUE(settled(outcome));
  EXPECT_EQ(outcome.load(), 1) << "the job spawned by the hook never ran";
}

}  // namespace
}  // namespace volt::test
