#include "volt/error.hpp"

namespace volt {
namespace {

class VoltCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "volt"; }
  std::string message(int code) const override {
    switch (static_cast<errc>(code)) {
      case errc::cancelled:
        return "task was cancelled";
      case errc::runtime_shutdown:
        return "runtime is shut down";
      case errc::invalid_handle:
        return "join handle is empty (moved from or already joined)";
      case errc::blocking_in_runtime:
        return "blocking call on a runtime thread";
      case errc::no_runtime:
        return "no volt runtime on this thread";
      case errc::invalid_argument:
        return "invalid argument";
      case errc::timed_out:
        return "deadline elapsed before the operation completed";
      case errc::closed:
        return "closed";
      case errc::empty:
        return "channel is empty";
      case errc::full:
        return "channel is full";
      case errc::lagged:
        return "receiver lagged behind; values were overwritten";
      case errc::unexpected_eof:
        return "end of stream before the expected bytes";
      case errc::write_zero:
        return "stream accepted no bytes of a non-empty write";
      case errc::host_not_found:
        return "host name could not be resolved";
    }
    return "unknown volt error";
  }
};

}  // namespace

const std::error_category& volt_category() noexcept {
  static const VoltCategory category;
  return category;
}

}  // namespace volt
