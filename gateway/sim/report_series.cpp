#include "gateway/sim/report_series.hpp"

#include <cmath>
#include <cstdio>

namespace tollgate::sim {

namespace {

constexpr std::size_t text_rows = 24;

/// `t` (seconds since the epoch) as RFC 3339 UTC to the second.
std::string second_text(std::int64_t t) {
  std::string s = format_time(t * core::ns_per_s);
  return s.substr(0, 19) + "Z";
}

void text_changes(std::string& out, const run_summary& run, const std::string& category) {
  for (const level_change_summary& c : run.changes) {
    if (c.category != category) continue;
    out += "    " + format_time(c.time) + " " + std::string(policy::attack_level_names[c.from]) +
           " -> " + std::string(policy::attack_level_names[c.to]) + ": " + c.why + "\n";
  }
}

void text_table(std::string& out, const run_summary& run, const category_summary& c) {
  const std::size_t factor = factor_for(c.series.size(), text_rows);
  const std::int64_t width = run.series_width * static_cast<std::int64_t>(factor);
  char buf[256];
  std::snprintf(buf, sizeof buf, "    %-20s %9s %8s %10s %9s %7s %7s %7s %7s  %s (%llds a row)\n",
                "from (UTC)", "req/s", "peak/s", "baseline/s", "admitted", "429", "428", "503",
                "other", "level", static_cast<long long>(width));
  out += buf;
  const std::vector<time_bucket> rows = coarser(c.series, factor);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const time_bucket& b = rows[i];
    const std::uint64_t named = of(b, core::outcome::limited) + of(b, core::outcome::challenged) +
                                of(b, core::outcome::under_attack);
    std::snprintf(buf, sizeof buf, "    %-20s %9s %8llu %10s %9llu %7llu %7llu %7llu %7llu  %s\n",
                  second_text(run.series_origin + static_cast<std::int64_t>(i) * width).c_str(),
                  rate_text(static_cast<double>(b.requests) / static_cast<double>(width)).c_str(),
                  static_cast<unsigned long long>(b.peak),
                  b.ticks > 0 ? rate_text(b.baseline()).c_str() : "-",
                  static_cast<unsigned long long>(b.admitted),
                  static_cast<unsigned long long>(of(b, core::outcome::limited)),
                  static_cast<unsigned long long>(of(b, core::outcome::challenged)),
                  static_cast<unsigned long long>(of(b, core::outcome::under_attack)),
                  static_cast<unsigned long long>(refused(b) - named),
                  std::string(policy::attack_level_names[b.level]).c_str());
    out += buf;
  }
}

}  // namespace

std::vector<time_bucket> coarser(const std::vector<time_bucket>& series, std::size_t factor) {
  if (factor <= 1) return series;
  std::vector<time_bucket> out((series.size() + factor - 1) / factor);
  for (std::size_t i = 0; i < series.size(); ++i)
    out[i / factor].merge(series[i]);
  return out;
}

std::size_t factor_for(std::size_t n, std::size_t rows) noexcept {
  return n <= rows ? 1 : (n + rows - 1) / rows;
}

std::uint64_t refused(const time_bucket& b) noexcept {
  return b.requests - b.admitted;
}

std::string rate_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v >= 100 || v == std::floor(v) ? "%.0f" : "%.1f", v);
  return buf;
}

void text_attack(std::string& out, const run_summary& run) {
  for (const category_summary& c : run.categories) {
    if (!c.attack) continue;
    std::size_t n = 0;
    for (const level_change_summary& l : run.changes)
      n += l.category == c.name ? 1 : 0;
    out += "  attack mode, category " + c.name + ": " + std::to_string(n) + " changes of level\n";
    text_changes(out, run, c.name);
    if (!c.series.empty()) text_table(out, run, c);
  }
}

}  // namespace tollgate::sim
