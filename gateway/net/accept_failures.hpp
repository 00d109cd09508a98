#pragma once
/// What an accept loop does when accept() fails (public and admin listeners alike). Out of
/// descriptors (EMFILE, ENFILE) or kernel memory, the pending connection stays in the backlog
/// and the listener stays readable: accepting again at once would spin a core and write a log
/// line per try. The loop pauses instead, and failures are logged at most once per interval,
/// with their count.

#include <chrono>
#include <cstdint>
#include <string_view>

#include "gateway/net/asio.hpp"

namespace tollgate::net {

/// Accept failures of one accept loop, and when they were last logged.
/// Thread safety: used by one accept loop only.
class accept_failures {
 public:
  /// How long to pause before accepting again after `ec` (zero: a failure of that one
  /// connection, such as a reset before accept). Counts it, and logs the failures so far at
  /// most once per `interval` for the listener `name`.
  std::chrono::milliseconds note(const error_code& ec, std::string_view name);

  /// Whether `ec` says the process or the system is out of descriptors or memory.
  static bool out_of_resources(const error_code& ec) noexcept;

  static constexpr std::chrono::seconds interval{10};     ///< between two log lines
  static constexpr std::chrono::milliseconds pause{100};  ///< after running out

 private:
  std::uint64_t unlogged_ = 0;                      ///< failures since the last line
  std::chrono::steady_clock::time_point logged_{};  ///< when the last line was written
};

}  // namespace tollgate::net
