#include "gateway/core/units.hpp"

#include <array>
#include <utility>

namespace tollgate::core {

namespace {

/// Splits "250ms" into ("250", "ms").
std::pair<std::string_view, std::string_view> split_number(std::string_view text) noexcept {
  std::size_t i = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9')
    ++i;
  return {text.substr(0, i), text.substr(i)};
}

template <class Unit>
std::optional<std::uint64_t> scaled(std::string_view text, const Unit& units,
                                    std::uint64_t limit) noexcept {
  const auto [digits, suffix] = split_number(text);
  const auto n = parse_uint(digits, limit);
  if (!n) return std::nullopt;
  for (const auto& [name, factor] : units) {
    if (suffix == name) {
      if (*n != 0 && factor > limit / *n) return std::nullopt;
      return *n * factor;
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::uint64_t> parse_uint(std::string_view text, std::uint64_t max) noexcept {
  if (text.empty() || text.size() > 20) return std::nullopt;
  std::uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    const std::uint64_t digit = static_cast<std::uint64_t>(c - '0');
    // digit > max first: max - digit would wrap ("7" under a max of 3 was read as 7).
    if (digit > max || value > (max - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  return value;
}

std::optional<rate> parse_rate(std::string_view text) noexcept {
  const auto slash = text.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  const auto count = parse_uint(text.substr(0, slash), 1'000'000'000);
  if (!count || *count == 0) return std::nullopt;
  const auto unit = text.substr(slash + 1);
  nanos period = 0;
  if (unit == "s") {
    period = ns_per_s;
  } else if (unit == "m") {
    period = 60 * ns_per_s;
  } else if (unit == "h") {
    period = 3600 * ns_per_s;
  } else {
    return std::nullopt;
  }
  return rate{static_cast<std::int64_t>(*count), period};
}

std::optional<nanos> parse_duration(std::string_view text) noexcept {
  static constexpr std::array<std::pair<std::string_view, std::uint64_t>, 7> units{{
      {"ns", 1},
      {"us", 1'000},
      {"ms", 1'000'000},
      {"s", 1'000'000'000},
      {"m", 60'000'000'000},
      {"h", 3'600'000'000'000},
      {"d", 86'400'000'000'000},
  }};
  // Bounded well inside int64 so that sums of durations cannot overflow.
  const auto v = scaled(text, units, std::uint64_t{1} << 60);
  if (!v) return std::nullopt;
  return static_cast<nanos>(*v);
}

std::optional<std::uint64_t> parse_size(std::string_view text) noexcept {
  static constexpr std::array<std::pair<std::string_view, std::uint64_t>, 8> units{{
      {"", 1},
      {"B", 1},
      {"KiB", 1ull << 10},
      {"MiB", 1ull << 20},
      {"GiB", 1ull << 30},
      {"KB", 1'000},
      {"MB", 1'000'000},
      {"GB", 1'000'000'000},
  }};
  return scaled(text, units, std::uint64_t{1} << 50);
}

}  // namespace tollgate::core
