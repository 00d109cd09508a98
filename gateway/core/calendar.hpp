#pragma once
/// Calendar windows in UTC (docs/design.md §3, "Quotas"): the day, the week from Monday 00:00 and
/// the month from the 1st that an instant falls in, as integer nanoseconds since the Unix epoch.
/// No time zone, no leap seconds (Unix time has none): a day is 86 400 s.

#include <cstdint>
#include <optional>
#include <string_view>

#include "gateway/core/clock.hpp"

namespace tollgate::core {

/// The length of a quota's window.
enum class period : std::uint8_t {
  day,    ///< from 00:00 UTC
  week,   ///< from Monday 00:00 UTC
  month,  ///< from the 1st, 00:00 UTC
};

/// Configuration name of a period: "day", "week" or "month".
constexpr std::string_view period_name(period p) noexcept {
  constexpr std::string_view names[] = {"day", "week", "month"};
  return names[static_cast<std::size_t>(p)];
}

/// The period called `name`, if any.
constexpr std::optional<period> period_from_name(std::string_view name) noexcept {
  for (const period p : {period::day, period::week, period::month}) {
    if (period_name(p) == name) return p;
  }
  return std::nullopt;
}

/// One window: [start, end).
struct calendar_window {
  nanos start;  ///< its first instant
  nanos end;    ///< the first instant of the next window
};

namespace detail {

inline constexpr std::int64_t seconds_per_day = 86'400;
inline constexpr nanos ns_per_day = seconds_per_day * ns_per_s;

/// floor(a / b) for b > 0.
constexpr std::int64_t floor_div(std::int64_t a, std::int64_t b) noexcept {
  return a / b - (a % b < 0 ? 1 : 0);
}

/// Days since 1970-01-01 of the proleptic Gregorian date y-m-d (Howard Hinnant's
/// days_from_civil).
constexpr std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) noexcept {
  y -= m <= 2 ? 1 : 0;
  const std::int64_t era = floor_div(y, 400);
  const auto yoe = static_cast<unsigned>(y - era * 400);                 // [0, 399]
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;  // [0, 365]
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;            // [0, 146096]
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

/// The year and month of day `z` since 1970-01-01 (Hinnant's civil_from_days, without the day).
struct year_month {
  std::int64_t year;
  unsigned month;  ///< 1..12
};
constexpr year_month civil_month(std::int64_t z) noexcept {
  z += 719468;
  const std::int64_t era = floor_div(z, 146097);
  const auto doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  const unsigned m = mp < 10 ? mp + 3 : mp - 9;
  return {static_cast<std::int64_t>(yoe) + era * 400 + (m <= 2 ? 1 : 0), m};
}

}  // namespace detail

/// The window of period `p` that instant `now` (Unix nanoseconds, UTC) falls in.
constexpr calendar_window window_of(period p, nanos now) noexcept {
  using namespace detail;
  const std::int64_t day = floor_div(now, ns_per_day);
  switch (p) {
    case period::day:
      return {day * ns_per_day, (day + 1) * ns_per_day};
    case period::week: {
      // 1970-01-01 was a Thursday: (day + 3) mod 7 is the number of days since Monday.
      const std::int64_t monday = day - (day + 3 - floor_div(day + 3, 7) * 7);
      return {monday * ns_per_day, (monday + 7) * ns_per_day};
    }
    case period::month:
      break;
  }
  const year_month ym = civil_month(day);
  const std::int64_t first = days_from_civil(ym.year, ym.month, 1);
  const std::int64_t next = ym.month == 12 ? days_from_civil(ym.year + 1, 1, 1)
                                           : days_from_civil(ym.year, ym.month + 1, 1);
  return {first * ns_per_day, next * ns_per_day};
}

/// The window's length in whole seconds: 86 400 for a day, 604 800 for a week, the length of
/// the month `now` falls in (28 to 31 days) for a month.
constexpr std::int64_t window_seconds(period p, nanos now) noexcept {
  const calendar_window w = window_of(p, now);
  return (w.end - w.start) / ns_per_s;
}

}  // namespace tollgate::core
