#include "gateway/core/clock.hpp"

#include <chrono>

namespace tollgate::core {

namespace {
nanos steady_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

steady_unix_clock::steady_unix_clock(nanos shift) {
  const nanos wall = std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  offset_ = wall - steady_ns() + shift;
}

nanos steady_unix_clock::now() const noexcept {
  return steady_ns() + offset_;
}

}  // namespace tollgate::core
