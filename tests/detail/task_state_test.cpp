// Tests of volt::detail::TaskState (include/volt/detail/task_state.hpp).
//
// Tier 1: each named transition is driven from each state it can meet, and the
// whole word is checked after every step (flags and reference count), so an
// extra or missing bit or reference fails the test.
// Tier 2: (a) two transitions released at the same instant on an idle task
// (two wakes; abort against shutdown), many rounds, each checked against the
// reference count; (b) wakers (by reference and by value) racing two model
// pollers that follow the harness's protocol (src/task/harness.cpp): the task
// is never polled by two threads at once, no wake-up is lost, and the
// reference count ends exactly where the protocol says.
#include "volt/detail/task_state.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "test_support.hpp"

namespace volt::detail {
namespace {

using Word = TaskState::Word;
using ToRunning = TaskState::ToRunning;
using ToIdle = TaskState::ToIdle;
using ToNotified = TaskState::ToNotified;

constexpr Word kFlagMask = TaskState::kRefOne - 1;

Word flags(const TaskState& s) {
  return s.load().bits & kFlagMask;
}
Word refs(const TaskState& s) {
  return s.load().ref_count();
}

// Initial -> polled once -> idle: the queue entry's reference is gone, the
// JoinHandle's and the owned list's remain.
void make_idle(TaskState& s) {
  ASSERT_EQ(s.transition_to_running(), ToRunning::kSuccess);
  ASSERT_EQ(s.transition_to_idle(), ToIdle::kOk);
  ASSERT_EQ(flags(s), TaskState::kJoinInterest);
  ASSERT_EQ(refs(s), 2u);
}

// Initial -> running (the poll holds the queue entry's reference).
void make_running(TaskState& s) {
  ASSERT_EQ(s.transition_to_running(), ToRunning::kSuccess);
  ASSERT_EQ(flags(s), TaskState::kRunning | TaskState::kJoinInterest);
  ASSERT_EQ(refs(s), 3u);
}

// Initial -> running -> complete; 3 references still held (poll, handle, list).
void make_complete(TaskState& s) {
  make_running(s);
  TaskState::Snapshot after = s.transition_to_complete();
  ASSERT_TRUE(after.is_complete());
  ASSERT_FALSE(after.is_running());
  ASSERT_EQ(flags(s), TaskState::kComplete | TaskState::kJoinInterest);
}

TEST(TaskStateTest, InitialStateIsNotifiedWithJoinInterestAndThreeReferences) {
  TaskState s;
  TaskState::Snapshot snap = s.load();
  EXPECT_EQ(snap.bits, TaskState::kInitial);
  EXPECT_EQ(snap.ref_count(), 3u);
  EXPECT_TRUE(snap.is_notified());
  EXPECT_TRUE(snap.is_join_interested());
  EXPECT_TRUE(snap.is_idle());
  EXPECT_FALSE(snap.is_running());
  EXPECT_FALSE(snap.is_complete());
  EXPECT_FALSE(snap.is_join_waker_set());
  EXPECT_FALSE(snap.is_cancelled());
}

TEST(TaskStateTest, LayoutKeepsFlagsBelowTheReferenceCount) {
  const Word all_flags = TaskState::kRunning | TaskState::kComplete | TaskState::kNotified |
                         TaskState::kJoinInterest | TaskState::kJoinWaker | TaskState::kCancelled |
                         TaskState::kQueuedEntry;
  EXPECT_EQ(all_flags & TaskState::kRefMask, 0u);
  EXPECT_EQ(all_flags, kFlagMask);  // seven distinct bits, no gaps below kRefOne
  EXPECT_EQ(TaskState::Snapshot{5 * TaskState::kRefOne | all_flags}.ref_count(), 5u);
}

// ---- transition_to_running ----

TEST(TaskStateTest, ToRunningFromNotifiedSucceedsAndKeepsTheQueueReference) {
  TaskState s;
  EXPECT_EQ(s.transition_to_running(), ToRunning::kSuccess);
  EXPECT_EQ(flags(s), TaskState::kRunning | TaskState::kJoinInterest);
  EXPECT_EQ(refs(s), 3u);
}

TEST(TaskStateTest, ToRunningOfAnAbortedQueuedTaskClaimsItAsCancelled) {
  TaskState s;
  // Aborted while queued: already notified, so no new queue entry.
  EXPECT_FALSE(s.transition_to_notified_and_cancel());
  EXPECT_EQ(refs(s), 3u);
  EXPECT_EQ(s.transition_to_running(), ToRunning::kCancelled);
  // Left claimed (running) for the caller to cancel and complete.
  EXPECT_EQ(flags(s), TaskState::kRunning | TaskState::kCancelled | TaskState::kJoinInterest);
  EXPECT_EQ(refs(s), 3u);
}

TEST(TaskStateTest, ToRunningFailsWhenShutdownClaimedTheTaskAndDropsTheEntryReference) {
  TaskState s;  // queued (notified) with its entry's reference
  EXPECT_TRUE(s.transition_to_shutdown());
  EXPECT_TRUE(s.load().is_running());
  EXPECT_TRUE(s.load().is_cancelled());
  // The stale queue entry is polled while shutdown holds the task.
  const Word claimed = flags(s);
  EXPECT_EQ(s.transition_to_running(), ToRunning::kFailed);
  EXPECT_EQ(refs(s), 2u);
  // Only the reference changed: the task is still shutdown's to cancel.
  EXPECT_EQ(flags(s), claimed);
  EXPECT_TRUE(s.load().is_running());
}

TEST(TaskStateTest, ToRunningOfAStaleEntryOfACompletedTaskFails) {
  TaskState s;
  ASSERT_TRUE(s.transition_to_shutdown());
  (void)s.transition_to_complete();
  // Shutdown's own reference (the owned list's) ends with its completion.
  EXPECT_FALSE(s.transition_to_terminal(1));
  EXPECT_EQ(refs(s), 2u);
  EXPECT_EQ(s.transition_to_running(), ToRunning::kFailed);
  EXPECT_EQ(refs(s), 1u);
  EXPECT_TRUE(s.load().is_complete());
}

TEST(TaskStateTest, ToRunningDeallocatesWhenTheQueueEntryHeldTheLastReference) {
  TaskState s;
  ASSERT_TRUE(s.transition_to_shutdown());
  (void)s.transition_to_complete();
  EXPECT_FALSE(s.transition_to_terminal(1));  // owned list's
  TaskState::JoinHandleDropped dropped = s.transition_to_join_handle_dropped();
  EXPECT_TRUE(dropped.drop_output);
  EXPECT_FALSE(s.ref_dec());  // the JoinHandle's
  EXPECT_EQ(refs(s), 1u);
  EXPECT_EQ(s.transition_to_running(), ToRunning::kDealloc);
  EXPECT_EQ(refs(s), 0u);
}

// ---- inline polls (rule 5) ----

constexpr Word kInlineRunning =
    TaskState::kRunning | TaskState::kNotified | TaskState::kQueuedEntry | TaskState::kJoinInterest;

TEST(TaskStateTest, InlineClaimOfAQueuedTaskKeepsItsNotificationAndAddsTheReferenceOfThePoll) {
  TaskState s;  // queued, with its entry's reference
  EXPECT_TRUE(s.transition_to_running_inline());
  EXPECT_EQ(flags(s), kInlineRunning);
  EXPECT_EQ(refs(s), 4u);
  // A wake-up during the poll finds it notified already: nothing to submit.
  EXPECT_EQ(s.transition_to_notified_by_ref(), ToNotified::kDoNothing);
  EXPECT_EQ(refs(s), 4u);
}

TEST(TaskStateTest, InlineClaimIsRefusedUnlessQueuedIdleAndNotCancelled) {
  {
    TaskState s;
    make_idle(s);  // not queued
    EXPECT_FALSE(s.transition_to_running_inline());
    EXPECT_EQ(flags(s), TaskState::kJoinInterest);
  }
  {
    TaskState s;
    make_running(s);
    ASSERT_EQ(s.transition_to_notified_by_ref(), ToNotified::kDoNothing);  // running, notified
    EXPECT_FALSE(s.transition_to_running_inline());
  }
  {
    TaskState s;
    make_complete(s);
    EXPECT_FALSE(s.transition_to_running_inline());
  }
  {
    TaskState s;
    EXPECT_FALSE(s.transition_to_notified_and_cancel());  // queued and aborted
    EXPECT_FALSE(s.transition_to_running_inline());       // the queue's poller cancels it
    EXPECT_EQ(refs(s), 3u);
  }
  {
    TaskState s;
    ASSERT_TRUE(s.transition_to_running_inline());
    EXPECT_FALSE(s.transition_to_running_inline());  // one poll at a time
    EXPECT_EQ(refs(s), 4u);
  }
}

TEST(TaskStateTest, InlinePollEndingWithItsEntryStillQueuedLeavesTheTaskNotifiedForIt) {
  TaskState s;
  ASSERT_TRUE(s.transition_to_running_inline());
  EXPECT_EQ(s.transition_to_idle(), ToIdle::kOk);  // no second entry: the first is queued
  EXPECT_EQ(flags(s), TaskState::kNotified | TaskState::kJoinInterest);
  EXPECT_EQ(refs(s), 3u);
  // The entry then polls it as usual.
  EXPECT_EQ(s.transition_to_running(), ToRunning::kSuccess);
  EXPECT_EQ(refs(s), 3u);
}

TEST(TaskStateTest, EntryPoppedDuringAnInlinePollHandsTheNotificationToThePoll) {
  TaskState s;
  ASSERT_TRUE(s.transition_to_running_inline());
  // The worker pops the entry while the awaiting thread polls the task.
  EXPECT_EQ(s.transition_to_running(), ToRunning::kFailed);
  EXPECT_EQ(flags(s), TaskState::kRunning | TaskState::kNotified | TaskState::kJoinInterest);
  EXPECT_EQ(refs(s), 3u);
  // No entry is left: the poll's reference becomes a new one.
  EXPECT_EQ(s.transition_to_idle(), ToIdle::kOkNotified);
  EXPECT_EQ(flags(s), TaskState::kNotified | TaskState::kJoinInterest);
  EXPECT_EQ(refs(s), 3u);
}

TEST(TaskStateTest, TaskCompletedInlineLeavesItsEntryToDropItsReferenceWhenPopped) {
  TaskState s;
  ASSERT_TRUE(s.transition_to_running_inline());
  (void)s.transition_to_complete();
  EXPECT_FALSE(s.transition_to_terminal(2));  // the poll's and the owned list's
  EXPECT_EQ(refs(s), 2u);                     // the entry's and the JoinHandle's
  EXPECT_EQ(s.transition_to_running(), ToRunning::kFailed);
  EXPECT_EQ(refs(s), 1u);
  EXPECT_FALSE(s.load().has_queued_entry());
}

TEST(TaskStateTest, AbortDuringAnInlinePollIsLeftToThatPoll) {
  TaskState s;
  ASSERT_TRUE(s.transition_to_running_inline());
  EXPECT_FALSE(s.transition_to_notified_and_cancel());
  EXPECT_EQ(s.transition_to_idle(), ToIdle::kCancelled);  // stays claimed; it cancels
  EXPECT_TRUE(s.load().is_running());
  EXPECT_EQ(refs(s), 4u);
}

// ---- transition_to_idle ----

TEST(TaskStateTest, ToIdleWithoutWakeDropsThePollReference) {
  TaskState s;
  make_running(s);
  EXPECT_EQ(s.transition_to_idle(), ToIdle::kOk);
  EXPECT_EQ(flags(s), TaskState::kJoinInterest);
  EXPECT_EQ(refs(s), 2u);
}

TEST(TaskStateTest, WakeByRefWhileRunningSetsNotifiedAndToIdleReportsOkNotified) {
  TaskState s;
  make_running(s);
  EXPECT_EQ(s.transition_to_notified_by_ref(), ToNotified::kDoNothing);
  EXPECT_EQ(flags(s), TaskState::kRunning | TaskState::kNotified | TaskState::kJoinInterest);
  EXPECT_EQ(refs(s), 3u);  // no new reference: the poll's one is reused
  EXPECT_EQ(s.transition_to_idle(), ToIdle::kOkNotified);
  EXPECT_EQ(flags(s), TaskState::kNotified | TaskState::kJoinInterest);
  EXPECT_EQ(refs(s), 3u);  // kept: it is the new queue entry's
  // The re-queued entry polls normally.
  EXPECT_EQ(s.transition_to_running(), ToRunning::kSuccess);
  EXPECT_EQ(s.transition_to_idle(), ToIdle::kOk);
  EXPECT_EQ(refs(s), 2u);
}

TEST(TaskStateTest, WakeByValWhileRunningConsumesTheWakersReference) {
  TaskState s;
  make_running(s);
  s.ref_inc();  // a waker clone
  EXPECT_EQ(refs(s), 4u);
  EXPECT_EQ(s.transition_to_notified_by_val(), ToNotified::kDoNothing);
  EXPECT_EQ(refs(s), 3u);
  EXPECT_TRUE(s.load().is_notified());
  EXPECT_EQ(s.transition_to_idle(), ToIdle::kOkNotified);
  EXPECT_EQ(refs(s), 3u);
}

TEST(TaskStateTest, ToIdleReportsDeallocWhenThePollHeldTheLastReference) {
  TaskState s;
  make_running(s);
  EXPECT_FALSE(s.ref_dec());  // JoinHandle gone
  EXPECT_FALSE(s.ref_dec());  // owned list gone
  EXPECT_EQ(s.transition_to_idle(), ToIdle::kOkDealloc);
  EXPECT_EQ(refs(s), 0u);
}

TEST(TaskStateTest, ToIdleAfterAbortDuringThePollStaysClaimedAsCancelled) {
  TaskState s;
  make_running(s);
  EXPECT_FALSE(s.transition_to_notified_and_cancel());  // running: no submit
  EXPECT_EQ(flags(s), TaskState::kRunning | TaskState::kNotified | TaskState::kCancelled |
                          TaskState::kJoinInterest);
  EXPECT_EQ(refs(s), 3u);
  EXPECT_EQ(s.transition_to_idle(), ToIdle::kCancelled);
  // Unchanged: the caller still owns the frame and cancels it.
  EXPECT_EQ(flags(s), TaskState::kRunning | TaskState::kNotified | TaskState::kCancelled |
                          TaskState::kJoinInterest);
  EXPECT_EQ(refs(s), 3u);
}

// ---- wake-ups ----

TEST(TaskStateTest, WakeByRefOfAnIdleTaskSubmitsWithANewReference) {
  TaskState s;
  make_idle(s);
  EXPECT_EQ(s.transition_to_notified_by_ref(), ToNotified::kSubmit);
  EXPECT_EQ(flags(s), TaskState::kNotified | TaskState::kJoinInterest);
  EXPECT_EQ(refs(s), 3u);
}

TEST(TaskStateTest, WakeByRefOfANotifiedTaskDoesNothing) {
  TaskState s;
  make_idle(s);
  ASSERT_EQ(s.transition_to_notified_by_ref(), ToNotified::kSubmit);
  const Word before = s.load().bits;
  EXPECT_EQ(s.transition_to_notified_by_ref(), ToNotified::kDoNothing);
  EXPECT_EQ(s.load().bits, before);
  // The initial state is notified too.
  TaskState fresh;
  EXPECT_EQ(fresh.transition_to_notified_by_ref(), ToNotified::kDoNothing);
  EXPECT_EQ(fresh.load().bits, TaskState::kInitial);
}

TEST(TaskStateTest, WakeByRefOfACompleteTaskDoesNothing) {
  TaskState s;
  make_complete(s);
  const Word before = s.load().bits;
  EXPECT_EQ(s.transition_to_notified_by_ref(), ToNotified::kDoNothing);
  EXPECT_EQ(s.load().bits, before);
}

TEST(TaskStateTest, WakeByValOfAnIdleTaskHandsItsReferenceToTheQueue) {
  TaskState s;
  make_idle(s);
  s.ref_inc();  // the waker's
  EXPECT_EQ(s.transition_to_notified_by_val(), ToNotified::kSubmit);
  EXPECT_EQ(flags(s), TaskState::kNotified | TaskState::kJoinInterest);
  EXPECT_EQ(refs(s), 3u);
}

TEST(TaskStateTest, WakeByValOfANotifiedTaskDropsTheWakersReference) {
  TaskState s;
  s.ref_inc();
  EXPECT_EQ(s.transition_to_notified_by_val(), ToNotified::kDoNothing);
  EXPECT_EQ(s.load().bits, TaskState::kInitial);
}

TEST(TaskStateTest, WakeByValOfACompleteTaskDropsTheReferenceAndDeallocatesOnTheLast) {
  TaskState s;
  make_complete(s);
  s.ref_inc();
  EXPECT_EQ(s.transition_to_notified_by_val(), ToNotified::kDoNothing);
  EXPECT_EQ(refs(s), 3u);
  EXPECT_FALSE(s.load().is_notified());
  // Everybody else lets go; the waker holds the last reference.
  s.ref_inc();
  EXPECT_FALSE(s.transition_to_terminal(3));
  EXPECT_EQ(refs(s), 1u);
  EXPECT_EQ(s.transition_to_notified_by_val(), ToNotified::kDealloc);
  EXPECT_EQ(refs(s), 0u);
}

// ---- abort (transition_to_notified_and_cancel) ----

TEST(TaskStateTest, AbortOfAnIdleTaskSubmitsItWithANewReference) {
  TaskState s;
  make_idle(s);
  EXPECT_TRUE(s.transition_to_notified_and_cancel());
  EXPECT_EQ(flags(s), TaskState::kNotified | TaskState::kCancelled | TaskState::kJoinInterest);
  EXPECT_EQ(refs(s), 3u);
  // Its poll cancels it instead of resuming it.
  EXPECT_EQ(s.transition_to_running(), ToRunning::kCancelled);
}

TEST(TaskStateTest, AbortOfARunningTaskLeavesItToThePoller) {
  TaskState s;
  make_running(s);
  EXPECT_FALSE(s.transition_to_notified_and_cancel());
  EXPECT_TRUE(s.load().is_cancelled());
  EXPECT_TRUE(s.load().is_notified());
  EXPECT_EQ(refs(s), 3u);
}

TEST(TaskStateTest, AbortOfANotifiedTaskOnlyMarksItCancelled) {
  TaskState s;
  EXPECT_FALSE(s.transition_to_notified_and_cancel());
  EXPECT_EQ(s.load().bits, TaskState::kInitial | TaskState::kCancelled);
}

TEST(TaskStateTest, AbortOfACompleteTaskDoesNothing) {
  TaskState s;
  make_complete(s);
  const Word before = s.load().bits;
  EXPECT_FALSE(s.transition_to_notified_and_cancel());
  EXPECT_EQ(s.load().bits, before);
}

TEST(TaskStateTest, SecondAbortDoesNothing) {
  TaskState s;
  make_idle(s);
  ASSERT_TRUE(s.transition_to_notified_and_cancel());
  const Word before = s.load().bits;
  EXPECT_FALSE(s.transition_to_notified_and_cancel());
  EXPECT_EQ(s.load().bits, before);
}

// ---- completion and the join-waker handshake ----

TEST(TaskStateTest, ToCompleteSwapsRunningForCompleteAndReportsTheJoinSide) {
  TaskState s;
  make_running(s);
  ASSERT_TRUE(s.set_join_waker());
  TaskState::Snapshot snap = s.transition_to_complete();
  EXPECT_TRUE(snap.is_complete());
  EXPECT_FALSE(snap.is_running());
  EXPECT_TRUE(snap.is_join_interested());
  EXPECT_TRUE(snap.is_join_waker_set());
  EXPECT_EQ(snap.bits, s.load().bits);
  EXPECT_EQ(refs(s), 3u);
}

TEST(TaskStateTest, SetAndUnsetJoinWakerBeforeCompletion) {
  TaskState s;
  make_idle(s);
  EXPECT_TRUE(s.set_join_waker());
  EXPECT_TRUE(s.load().is_join_waker_set());
  EXPECT_TRUE(s.unset_join_waker());
  EXPECT_FALSE(s.load().is_join_waker_set());
  // Nothing to take back a second time.
  EXPECT_FALSE(s.unset_join_waker());
  EXPECT_EQ(flags(s), TaskState::kJoinInterest);
  EXPECT_EQ(refs(s), 2u);
}

TEST(TaskStateTest, SetJoinWakerFailsAfterCompletionAndLeavesTheBitClear) {
  TaskState s;
  make_complete(s);
  EXPECT_FALSE(s.set_join_waker());
  EXPECT_FALSE(s.load().is_join_waker_set());
}

TEST(TaskStateTest, UnsetJoinWakerFailsOnceTheTaskCompletedWithTheWakerSet) {
  TaskState s;
  make_running(s);
  ASSERT_TRUE(s.set_join_waker());
  (void)s.transition_to_complete();
  // The completing side owns the waker now; the JoinHandle cannot take it.
  EXPECT_FALSE(s.unset_join_waker());
  EXPECT_TRUE(s.load().is_join_waker_set());
  // The completing side hands it back.
  TaskState::Snapshot snap = s.unset_waker_after_complete();
  EXPECT_FALSE(snap.is_join_waker_set());
  EXPECT_TRUE(snap.is_join_interested());
  EXPECT_EQ(flags(s), TaskState::kComplete | TaskState::kJoinInterest);
}

TEST(TaskStateTest, JoinHandleDroppedBeforeCompletionTakesTheWakerBack) {
  TaskState s;
  make_idle(s);
  ASSERT_TRUE(s.set_join_waker());
  TaskState::JoinHandleDropped dropped = s.transition_to_join_handle_dropped();
  EXPECT_FALSE(dropped.drop_output);  // nothing written yet
  EXPECT_TRUE(dropped.drop_waker);
  EXPECT_EQ(flags(s), 0u);
  EXPECT_EQ(refs(s), 2u);  // the handle's reference is dropped separately
}

TEST(TaskStateTest, JoinHandleDroppedAfterCompletionWithoutWakerDropsOutputAndWaker) {
  TaskState s;
  make_complete(s);
  TaskState::JoinHandleDropped dropped = s.transition_to_join_handle_dropped();
  EXPECT_TRUE(dropped.drop_output);
  EXPECT_TRUE(dropped.drop_waker);
  EXPECT_EQ(flags(s), TaskState::kComplete);
}

TEST(TaskStateTest, JoinHandleDroppedWhileTheCompletingSideHoldsTheWakerLeavesItToThatSide) {
  TaskState s;
  make_running(s);
  ASSERT_TRUE(s.set_join_waker());
  (void)s.transition_to_complete();
  // The handle goes while the completing thread is waking the waker.
  TaskState::JoinHandleDropped dropped = s.transition_to_join_handle_dropped();
  EXPECT_TRUE(dropped.drop_output);
  EXPECT_FALSE(dropped.drop_waker);
  EXPECT_TRUE(s.load().is_join_waker_set());
  // The completing side sees that nobody is interested: it drops the waker.
  TaskState::Snapshot snap = s.unset_waker_after_complete();
  EXPECT_FALSE(snap.is_join_interested());
  EXPECT_EQ(flags(s), TaskState::kComplete);
}

// ---- shutdown ----

TEST(TaskStateTest, ShutdownClaimsAnIdleTask) {
  TaskState s;
  make_idle(s);
  EXPECT_TRUE(s.transition_to_shutdown());
  EXPECT_EQ(flags(s), TaskState::kRunning | TaskState::kCancelled | TaskState::kJoinInterest);
  EXPECT_EQ(refs(s), 2u);
}

TEST(TaskStateTest, ShutdownOfARunningTaskOnlyMarksItCancelled) {
  TaskState s;
  make_running(s);
  EXPECT_FALSE(s.transition_to_shutdown());
  EXPECT_EQ(flags(s), TaskState::kRunning | TaskState::kCancelled | TaskState::kJoinInterest);
  // Its poller cancels it at the end of the poll.
  EXPECT_EQ(s.transition_to_idle(), ToIdle::kCancelled);
}

TEST(TaskStateTest, ShutdownOfACompleteTaskDoesNotClaimIt) {
  TaskState s;
  make_complete(s);
  EXPECT_FALSE(s.transition_to_shutdown());
  EXPECT_TRUE(s.load().is_complete());
  EXPECT_FALSE(s.load().is_running());
  EXPECT_EQ(refs(s), 3u);
}

TEST(TaskStateTest, OnlyOneOfTwoShutdownsClaims) {
  TaskState s;
  make_idle(s);
  EXPECT_TRUE(s.transition_to_shutdown());
  EXPECT_FALSE(s.transition_to_shutdown());
}

// ---- reference counting ----

TEST(TaskStateTest, RefIncAndRefDecReportOnlyTheLastDrop) {
  TaskState s;
  s.ref_inc();
  EXPECT_EQ(refs(s), 4u);
  EXPECT_FALSE(s.ref_dec());
  EXPECT_FALSE(s.ref_dec());
  EXPECT_FALSE(s.ref_dec());
  EXPECT_EQ(refs(s), 1u);
  EXPECT_TRUE(s.ref_dec());
  EXPECT_EQ(refs(s), 0u);
  EXPECT_EQ(flags(s), TaskState::kNotified | TaskState::kJoinInterest);  // flags untouched
}

TEST(TaskStateTest, TransitionToTerminalDropsSeveralReferencesAtOnce) {
  TaskState s;
  make_complete(s);
  EXPECT_FALSE(s.transition_to_terminal(2));
  EXPECT_EQ(refs(s), 1u);
  EXPECT_TRUE(s.transition_to_terminal(1));
  EXPECT_EQ(refs(s), 0u);
}

// The harness's path for a task that completes while its JoinHandle waits,
// followed by the handle taking the output: the count reaches zero exactly
// once, on the last drop.
TEST(TaskStateTest, FullLifecycleReachesZeroReferencesOnTheLastDrop) {
  TaskState s;
  make_running(s);
  ASSERT_EQ(s.transition_to_idle(), ToIdle::kOk);                     // suspended on something
  ASSERT_TRUE(s.set_join_waker());                                    // the handle waits
  ASSERT_EQ(s.transition_to_notified_by_ref(), ToNotified::kSubmit);  // woken
  ASSERT_EQ(s.transition_to_running(), ToRunning::kSuccess);
  TaskState::Snapshot done = s.transition_to_complete();
  ASSERT_TRUE(done.is_join_waker_set());
  ASSERT_TRUE(s.unset_waker_after_complete().is_join_interested());
  EXPECT_FALSE(s.transition_to_terminal(2));  // the poll's and the owned list's
  EXPECT_EQ(refs(s), 1u);
  TaskState::JoinHandleDropped dropped = s.transition_to_join_handle_dropped();
  EXPECT_TRUE(dropped.drop_output);
  EXPECT_TRUE(dropped.drop_waker);
  EXPECT_TRUE(s.ref_dec());
  EXPECT_EQ(s.load().bits, TaskState::kComplete);
}

// ---- broken invariants abort with the state found ----

using TaskStateDeathTest = ::testing::Test;

TEST_F(TaskStateDeathTest, ToRunningWithoutNotifiedAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        TaskState s;
        make_idle(s);
        (void)s.transition_to_running();
      },
      "inconsistent task state in transition_to_running");
}

TEST_F(TaskStateDeathTest, ToIdleWithoutRunningAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        TaskState s;
        (void)s.transition_to_idle();
      },
      "inconsistent task state in transition_to_idle");
}

TEST_F(TaskStateDeathTest, RefDecBelowZeroAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        TaskState s;
        for (int i = 0; i < 4; ++i)
          (void)s.ref_dec();
      },
      "refcount underflow");
}

// ---- racing transitions on one idle task ----
//
// Each round puts a fresh task in the idle state, releases the threads at
// once, and checks the outcome against the reference count: every reported
// kSubmit (or abort's `true`) must have added exactly one queue reference,
// and at most one queue entry may exist.

// Spins until every thread of the round arrived, so that the transitions
// really race.
class StartLine {
 public:
  explicit StartLine(int threads) : threads_(threads) {}
  void arrive_and_wait(int round) {
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == threads_ * (round + 1)) {
      go_.store(round + 1, std::memory_order_release);
    }
    // Spin (so that both threads leave at once), but yield now and then so
    // that a descheduled peer gets the CPU back on a small machine.
    for (int spins = 1; go_.load(std::memory_order_acquire) <= round; ++spins) {
      if (spins % (1 << 14) == 0) std::this_thread::yield();
    }
  }

 private:
  const int threads_;
  std::atomic<int> arrived_{0};
  std::atomic<int> go_{0};
};

TEST(TaskStateStressTest, ConcurrentWakeByRefOfAnIdleTaskSubmitsExactlyOnce) {
  const int kRounds = static_cast<int>(test::scale(50'000));
  constexpr int kThreads = 2;
  std::vector<std::unique_ptr<TaskState>> states;
  for (int r = 0; r < kRounds; ++r) {
    states.push_back(std::make_unique<TaskState>());
    make_idle(*states.back());
  }
  std::vector<std::atomic<int>> submits(kRounds);
  StartLine start(kThreads);
  auto body = [&] {
    for (int r = 0; r < kRounds; ++r) {
      start.arrive_and_wait(r);
      if (states[r]->transition_to_notified_by_ref() == ToNotified::kSubmit)
        submits[r].fetch_add(1, std::memory_order_relaxed);
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back(body);
  for (auto& t : threads)
    t.join();

  int wrong = 0;
  for (int r = 0; r < kRounds; ++r) {
    // One wake found it idle and queued it (with one new reference); the
    // other found it notified and did nothing.
    const bool ok = submits[r].load() == 1 && refs(*states[r]) == 3u &&
                    flags(*states[r]) == (TaskState::kNotified | TaskState::kJoinInterest);
    if (!ok && wrong++ < 5) {
      ADD_FAILURE() << "round " << r << ": " << submits[r].load()
                    << " wakes reported kSubmit; state 0x" << std::hex << states[r]->load().bits;
    }
  }
  EXPECT_EQ(wrong, 0) << "of " << kRounds << " rounds";
}

TEST(TaskStateStressTest, AbortRacingShutdownAddsAReferenceOnlyWhenItSubmits) {
  const int kRounds = static_cast<int>(test::scale(50'000));
  std::vector<std::unique_ptr<TaskState>> states;
  for (int r = 0; r < kRounds; ++r) {
    states.push_back(std::make_unique<TaskState>());
    make_idle(*states.back());
  }
  std::vector<char> abort_submitted(kRounds), shutdown_claimed(kRounds);
  StartLine start(2);
  std::thread aborter([&] {
    for (int r = 0; r < kRounds; ++r) {
      start.arrive_and_wait(r);
      abort_submitted[r] = states[r]->transition_to_notified_and_cancel();
    }
  });
  std::thread shutdown([&] {
    for (int r = 0; r < kRounds; ++r) {
      start.arrive_and_wait(r);
      shutdown_claimed[r] = states[r]->transition_to_shutdown();
    }
  });
  aborter.join();
  shutdown.join();

  int wrong = 0;
  for (int r = 0; r < kRounds; ++r) {
    // Shutdown always finds the task idle (abort never claims it), so it
    // claims it. Abort submits only if it came first, and then it added the
    // queue entry's reference.
    const Word expected_refs = 2u + (abort_submitted[r] ? 1u : 0u);
    const bool ok = shutdown_claimed[r] && refs(*states[r]) == expected_refs &&
                    states[r]->load().is_cancelled() && states[r]->load().is_running();
    if (!ok && wrong++ < 5) {
      ADD_FAILURE() << "round " << r << ": abort submitted=" << bool(abort_submitted[r])
                    << " shutdown claimed=" << bool(shutdown_claimed[r]) << " state 0x" << std::hex
                    << states[r]->load().bits;
    }
  }
  EXPECT_EQ(wrong, 0) << "of " << kRounds << " rounds";
}

// ---- concurrent wakers against model pollers ----
//
// The model task's "work" is a counter that wakers increment before waking
// it; a poll reads it. Pollers take entries from a shared FIFO and follow the
// harness: transition_to_running, poll, transition_to_idle, re-queue on
// kOkNotified. Wakers use by-reference wakes and by-value wakes of a cloned
// reference, submitting on kSubmit. At the end (all wakers done, queue
// drained) the last poll must have seen every increment, the task must be
// idle and unnotified, and exactly the two non-queue references must remain.
class ModelScheduler {
 public:
  void push(int entry) {
    outstanding_.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard lock(mutex_);
    queue_.push_back(entry);
  }
  bool try_pop() {
    std::lock_guard lock(mutex_);
    if (queue_.empty()) return false;
    queue_.pop_front();
    return true;
  }
  // An entry's processing finished (after any re-push it caused).
  void done_with_entry() { outstanding_.fetch_sub(1, std::memory_order_acq_rel); }
  std::int64_t outstanding() const { return outstanding_.load(std::memory_order_acquire); }

 private:
  std::mutex mutex_;
  std::deque<int> queue_;
  std::atomic<std::int64_t> outstanding_{0};
};

TEST(TaskStateStressTest, ConcurrentWakesNeverPollTwiceAtOnceAndNeverGetLost) {
  const std::size_t kWakesPerThread = test::scale(50'000);
  constexpr int kWakers = 3;
  constexpr int kPollers = 2;

  TaskState state;
  ModelScheduler sched;
  std::atomic<std::uint64_t> produced{0};
  std::atomic<std::uint64_t> seen_by_last_poll{0};
  std::atomic<int> running{0};
  std::atomic<int> overlapping_polls{0};
  std::atomic<int> bad_outcomes{0};
  std::atomic<int> lost_wakeups{0};
  std::atomic<std::uint64_t> polls{0};
  std::atomic<int> wakers_left{kWakers};

  sched.push(0);  // the initial queue entry (the state starts notified)

  auto poller = [&] {
    for (;;) {
      if (!sched.try_pop()) {
        if (wakers_left.load(std::memory_order_acquire) == 0 && sched.outstanding() == 0) return;
        std::this_thread::yield();
        continue;
      }
      switch (state.transition_to_running()) {
        case ToRunning::kSuccess:
          break;
        default:
          bad_outcomes.fetch_add(1);  // nothing cancels or completes this task
          sched.done_with_entry();
          continue;
      }
      if (running.fetch_add(1, std::memory_order_acq_rel) != 0) overlapping_polls.fetch_add(1);
      if (!state.load().is_running()) bad_outcomes.fetch_add(1);
      // The poll: take all the work published so far, then stay running a
      // little so that wakes land during the poll (and must re-queue it).
      seen_by_last_poll.store(produced.load(std::memory_order_acquire), std::memory_order_release);
      const std::uint64_t n = polls.fetch_add(1, std::memory_order_relaxed);
      if (n % 4 == 0) std::this_thread::yield();
      running.fetch_sub(1, std::memory_order_acq_rel);
      switch (state.transition_to_idle()) {
        case ToIdle::kOk:
          break;
        case ToIdle::kOkNotified:
          sched.push(1);  // the poll's reference goes with the new entry
          break;
        default:
          bad_outcomes.fetch_add(1);
          break;
      }
      sched.done_with_entry();
    }
  };

  // Each waker waits until a poll has seen its work before producing more, so
  // most wakes race with a poll in progress; a lost wake-up leaves it waiting
  // (bounded by a generous deadline, then reported).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  auto waker = [&](int index) {
    for (std::size_t i = 0; i < kWakesPerThread; ++i) {
      const std::uint64_t mine = produced.fetch_add(1, std::memory_order_acq_rel) + 1;
      ToNotified action;
      if ((i + static_cast<std::size_t>(index)) % 2 == 0) {
        action = state.transition_to_notified_by_ref();
      } else {
        state.ref_inc();  // clone a waker, then wake by value
        action = state.transition_to_notified_by_val();
      }
      if (action == ToNotified::kSubmit) sched.push(2);
      if (action == ToNotified::kDealloc) bad_outcomes.fetch_add(1);
      while (seen_by_last_poll.load(std::memory_order_acquire) < mine) {
        if (std::chrono::steady_clock::now() > deadline) {
          lost_wakeups.fetch_add(1);
          wakers_left.fetch_sub(1, std::memory_order_acq_rel);
          return;
        }
        std::this_thread::yield();
      }
    }
    wakers_left.fetch_sub(1, std::memory_order_acq_rel);
  };

  std::vector<std::thread> threads;
  for (int i = 0; i < kPollers; ++i)
    threads.emplace_back(poller);
  for (int i = 0; i < kWakers; ++i)
    threads.emplace_back(waker, i);
  for (auto& t : threads)
    t.join();

  EXPECT_EQ(overlapping_polls.load(), 0);
  EXPECT_EQ(lost_wakeups.load(), 0);
  EXPECT_EQ(bad_outcomes.load(), 0);
  const std::uint64_t total = kWakesPerThread * kWakers;
  EXPECT_EQ(produced.load(), total);
  // No lost wake-up: the last poll ran after the last increment.
  EXPECT_EQ(seen_by_last_poll.load(), total);
  EXPECT_GE(polls.load(), 1u);
  EXPECT_EQ(flags(state), TaskState::kJoinInterest);
  EXPECT_EQ(refs(state), 2u);  // JoinHandle + owned list; every waker's is gone
}

}  // namespace
}  // namespace volt::detail
