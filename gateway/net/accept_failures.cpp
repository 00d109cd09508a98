#include "gateway/net/accept_failures.hpp"

#include <spdlog/spdlog.h>

#include <cerrno>

namespace tollgate::net {

bool accept_failures::out_of_resources(const error_code& ec) noexcept {
  if (ec.category() != boost::system::system_category()) return false;
  const int e = ec.value();
  return e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM;
}

std::chrono::milliseconds accept_failures::note(const error_code& ec, std::string_view name) {
  ++unlogged_;
  const auto now = std::chrono::steady_clock::now();
  if (now - logged_ >= interval) {
    spdlog::warn(
        "accept on {}: {} ({} failure(s) in the last {} s at most; pausing {} ms "
        "after each time out of descriptors or memory)",
        name, ec.message(), unlogged_, interval.count(), pause.count());
    unlogged_ = 0;
    logged_ = now;
  }
  return out_of_resources(ec) ? pause : std::chrono::milliseconds(0);
}

}  // namespace tollgate::net
