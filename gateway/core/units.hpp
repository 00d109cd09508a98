#pragma once
/// Parsing of the unit-bearing values written in configuration: durations, rates and sizes.

#include <cstdint>
#include <optional>
#include <string_view>

#include "gateway/core/clock.hpp"

namespace tollgate::core {

/// `count` events per `period` nanoseconds, as written `5/s`, `30/m`, `1000/h`.
struct rate {
  std::int64_t count = 0;  ///< events per period, >= 1
  nanos period = 0;        ///< one second, minute or hour in nanoseconds
  friend bool operator==(const rate&, const rate&) = default;
};

/// Parses `N/s`, `N/m` or `N/h` with 1 <= N <= 10^9; nullopt when malformed.
std::optional<rate> parse_rate(std::string_view text) noexcept;

/// Parses a non-negative duration `<N><unit>`, unit one of ns, us, ms, s, m, h, d
/// (for example `250ms`, `5s`, `1h`); nullopt when malformed or too large.
std::optional<nanos> parse_duration(std::string_view text) noexcept;

/// Parses a byte size `<N>[B|KiB|MiB|GiB|KB|MB|GB]` (for example `16KiB`, `1MiB`, `512`);
/// nullopt when malformed or too large.
std::optional<std::uint64_t> parse_size(std::string_view text) noexcept;

/// Parses a whole decimal number without sign or spaces; nullopt when malformed or above `max`.
std::optional<std::uint64_t> parse_uint(std::string_view text, std::uint64_t max) noexcept;

}  // namespace tollgate::core
