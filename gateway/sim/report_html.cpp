// The report as one self-contained HTML page (docs/simulator.md, "The HTML report"): per
// category, inline SVG charts of its time series. Nothing is loaded from anywhere: the page's
// Content-Security-Policy (report_page.html) forbids it, and no string from a log or a
// configuration reaches the page unescaped.

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "gateway/policy/challenge_page.hpp"
#include "gateway/sim/report.hpp"
#include "gateway/sim/report_page.hpp"
#include "gateway/sim/report_series.hpp"

namespace tollgate::sim {

namespace {

constexpr double chart_width = 960, left = 72, right = 16, top = 12, bottom = 34;
constexpr double plot_width = chart_width - left - right;
/// Bars a chart draws at most: about two pixels each.
constexpr std::size_t max_bars = 440;
/// Colours by level: normal, elevated, high, severe.
constexpr const char* level_colours[] = {"#e3f1e3", "#ffe08a", "#ff9f43", "#e8403a"};

/// `s` for HTML text and attribute values: the five special characters as entities, and any
/// byte but printable ASCII as \xHH (a host or a path may hold anything).
std::string esc(std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) {
      policy::append_html_escaped(out, std::string_view(&c, 1));
    } else {
      out += "\\x";
      out += hex[u >> 4];
      out += hex[u & 15];
    }
  }
  return out;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

/// The smallest of 1, 2, 5 times a power of ten at or above `v`.
double nice(double v) {
  if (v <= 0) return 1;
  const double p = std::pow(10.0, std::floor(std::log10(v)));
  for (const double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= v) return m * p;
  return 10 * p;
}

/// A chart's frame: time on x (`n` bars of `width` seconds from `origin`), 0..`ymax` on y.
struct frame {
  std::int64_t origin = 0, width = 1;
  std::size_t n = 1;
  double height = 200, ymax = 1;

  double x(double bar) const { return left + plot_width * bar / static_cast<double>(n); }
  double y(double v) const {
    return top + (height - top - bottom) * (1 - std::min(v, ymax) / ymax);
  }
  double floor_y() const { return height - bottom; }
};

/// The y axis's grid and labels, and the x axis's UTC times at a round step.
void axes(std::string& out, const frame& f, const std::string& y_label) {
  const double step = nice(f.ymax / 4);
  for (double v = 0; v <= f.ymax * 1.0001; v += step) {
    out += "<line x1=\"" + num(left) + "\" x2=\"" + num(left + plot_width) + "\" y1=\"" +
           num(f.y(v)) + "\" y2=\"" + num(f.y(v)) + "\" stroke=\"#e4e7ec\"/>";
    out += "<text x=\"" + num(left - 6) + "\" y=\"" + num(f.y(v) + 4) + "\" text-anchor=\"end\">" +
           rate_text(v) + "</text>";
  }
  out += "<text transform=\"translate(14," + num((f.height - bottom + top) / 2) +
         ") rotate(-90)\" text-anchor=\"middle\">" + esc(y_label) + "</text>";
  const std::int64_t span = f.width * static_cast<std::int64_t>(f.n);
  static constexpr std::int64_t steps[] = {
      1,    2,    5,    10,    15,    30,    60,    120,    300,    600,     900,
      1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800, 2592000, 31536000};
  std::int64_t t_step = steps[std::size(steps) - 1];
  for (const std::int64_t s : steps) {
    if (s * 6 >= span) {
      t_step = s;
      break;
    }
  }
  const bool days = span > 86400;
  for (std::int64_t t = (f.origin + t_step - 1) / t_step * t_step; t <= f.origin + span;
       t += t_step) {
    const double at = f.x(static_cast<double>(t - f.origin) / static_cast<double>(f.width));
    const std::string when = format_time(t * core::ns_per_s);  // 2026-11-23T09:24:23.000000Z
    const std::string label = days ? when.substr(5, 11) : when.substr(11, 8);
    out += "<line x1=\"" + num(at) + "\" x2=\"" + num(at) + "\" y1=\"" + num(f.floor_y()) +
           "\" y2=\"" + num(f.floor_y() + 4) + "\" stroke=\"#556\"/>";
    out += "<text x=\"" + num(at) + "\" y=\"" + num(f.floor_y() + 16) +
           "\" text-anchor=\"middle\">" + label + "</text>";
  }
  out += "<line x1=\"" + num(left) + "\" x2=\"" + num(left + plot_width) + "\" y1=\"" +
         num(f.floor_y()) + "\" y2=\"" + num(f.floor_y()) + "\" stroke=\"#556\"/>";
  out += "<text x=\"" + num(left + plot_width) + "\" y=\"" + num(f.height - 4) +
         "\" text-anchor=\"end\">time (UTC)</text>";
}

/// A line through the middle of each bar whose `pick` has a value; a gap where it has none.
template <typename Pick>
void line(std::string& out, const frame& f, const std::vector<time_bucket>& bars, Pick pick,
          const char* colour, const char* dash) {
  std::string d;
  bool pen = false;
  for (std::size_t i = 0; i < bars.size(); ++i) {
    const double v = pick(bars[i]);
    if (v < 0) {
      pen = false;
      continue;
    }
    d += pen ? " L" : " M";
    d += num(f.x(static_cast<double>(i) + 0.5)) + " " + num(f.y(v));
    pen = true;
  }
  if (d.empty()) return;
  out += "<path d=\"" + d + "\" fill=\"none\" stroke=\"" + colour + "\" stroke-width=\"1.6\"" +
         (dash[0] != '\0' ? std::string(" stroke-dasharray=\"") + dash + "\"" : "") + "/>";
}

std::string legend(const std::vector<std::pair<const char*, std::string>>& items) {
  std::string out = "<div class=\"legend\">";
  for (const auto& [colour, text] : items)
    out += "<span><i style=\"background:" + std::string(colour) + "\"></i>" + esc(text) + "</span>";
  return out + "</div>\n";
}

void svg_open(std::string& out, double height, const std::string& label) {
  // Inline SVG in HTML needs no namespace (and the page names no URL at all).
  out += "<svg width=\"" + num(chart_width) + "\" height=\"" + num(height) + "\" viewBox=\"0 0 " +
         num(chart_width) + " " + num(height) + "\" role=\"img\" aria-label=\"" + esc(label) +
         "\">";
}

/// The request rate (mean and busiest second) against the baseline and the levels' thresholds.
void rate_chart(std::string& out, const frame& base, const category_summary& c,
                const std::vector<time_bucket>& bars) {
  static constexpr const char* threshold_colours[] = {"", "#c99a00", "#e07000", "#c8201a"};
  const auto w = static_cast<double>(base.width);
  double ymax = 1, lowest = 0;
  for (std::size_t l = 1; l < policy::attack_levels; ++l)
    if (c.above[l] > 0 && lowest == 0) lowest = c.above[l];
  for (const time_bucket& b : bars) {
    ymax = std::max(ymax, static_cast<double>(b.peak));
    if (b.ticks > 0) ymax = std::max(ymax, b.baseline() * std::max(1.0, lowest));
  }
  frame f = base;
  f.height = 240;
  f.ymax = nice(ymax * 1.05);
  svg_open(out, f.height, "request rate of category " + c.name);
  axes(out, f, "requests per second");
  line(
      out, f, bars, [&](const time_bucket& b) { return static_cast<double>(b.peak); }, "#9cc3e6",
      "");
  line(
      out, f, bars, [&](const time_bucket& b) { return static_cast<double>(b.requests) / w; },
      "#1f5fa8", "");
  if (c.attack) {
    line(
        out, f, bars, [](const time_bucket& b) { return b.ticks ? b.baseline() : -1; }, "#333",
        "6 4");
    for (std::size_t l = 1; l < policy::attack_levels; ++l) {
      if (c.above[l] == 0) continue;
      const double m = c.above[l];
      line(
          out, f, bars, [&](const time_bucket& b) { return b.ticks ? b.baseline() * m : -1; },
          threshold_colours[l], "2 3");
    }
  }
  out += "</svg>\n";
  std::vector<std::pair<const char*, std::string>> keys = {
      {"#1f5fa8", "mean rate (requests/s)"}, {"#9cc3e6", "busiest second (requests/s)"}};
  if (c.attack) {
    keys.emplace_back("#333", "learnt baseline (dashed)");
    for (std::size_t l = 1; l < policy::attack_levels; ++l) {
      if (c.above[l] == 0) continue;
      keys.emplace_back(threshold_colours[l], std::string(policy::attack_level_names[l]) +
                                                  " threshold: " + rate_text(c.above[l]) +
                                                  "x baseline (dotted)");
    }
  }
  out += legend(keys);
}

/// Answers per second, stacked: forwarded, then each kind of refusal.
void outcome_chart(std::string& out, const frame& base, const category_summary& c,
                   const std::vector<time_bucket>& bars) {
  struct part {
    const char* colour;
    const char* name;
    std::uint64_t (*pick)(const time_bucket&);
  };
  static constexpr part parts[] = {
      {"#3c9d4e", "admitted", [](const time_bucket& b) { return b.admitted; }},
      {"#f08c00", "429 limited",
       [](const time_bucket& b) { return of(b, core::outcome::limited); }},
      {"#e6c229", "428 challenged",
       [](const time_bucket& b) { return of(b, core::outcome::challenged); }},
      {"#d7263d", "503 under attack",
       [](const time_bucket& b) { return of(b, core::outcome::under_attack); }},
      {"#7b4fa0", "403/401 banned, denied, unauthorized", [](const time_bucket& b) {
         return of(b, core::outcome::banned) + of(b, core::outcome::denied) +
                of(b, core::outcome::unauthorized);
       }}};
  const auto w = static_cast<double>(base.width);
  double ymax = 1;
  for (const time_bucket& b : bars)
    ymax = std::max(ymax, static_cast<double>(b.requests) / w);
  frame f = base;
  f.height = 200;
  f.ymax = nice(ymax * 1.05);
  svg_open(out, f.height, "answers of category " + c.name);
  axes(out, f, "answers per second");
  const double bar = plot_width / static_cast<double>(f.n);
  for (std::size_t i = 0; i < bars.size(); ++i) {
    double sum = 0;
    for (const part& p : parts) {
      const double v = static_cast<double>(p.pick(bars[i])) / w;
      if (v <= 0) continue;
      out += "<rect x=\"" + num(f.x(static_cast<double>(i))) + "\" y=\"" + num(f.y(sum + v)) +
             "\" width=\"" + num(std::max(bar, 0.6)) + "\" height=\"" +
             num(f.y(sum) - f.y(sum + v)) + "\" fill=\"" + p.colour + "\"/>";
      sum += v;
    }
  }
  out += "</svg>\n";
  std::vector<std::pair<const char*, std::string>> keys;
  for (const part& p : parts)
    keys.emplace_back(p.colour, p.name);
  out += legend(keys);
}

/// The level in force, as a band of colour.
void level_band(std::string& out, const frame& base, const category_summary& c,
                const std::vector<time_bucket>& bars) {
  constexpr double height = 30;
  svg_open(out, height, "attack level of category " + c.name);
  out += "<text x=\"" + num(left - 6) + "\" y=\"19\" text-anchor=\"end\">level</text>";
  for (std::size_t i = 0; i < bars.size();) {
    std::size_t j = i;
    while (j < bars.size() && bars[j].level == bars[i].level)
      ++j;
    out += "<rect x=\"" + num(base.x(static_cast<double>(i))) + "\" y=\"4\" width=\"" +
           num(base.x(static_cast<double>(j)) - base.x(static_cast<double>(i))) +
           "\" height=\"22\" fill=\"" + level_colours[bars[i].level] + "\"><title>" +
           std::string(policy::attack_level_names[bars[i].level]) + "</title></rect>";
    i = j;
  }
  out += "</svg>\n";
  std::vector<std::pair<const char*, std::string>> keys;
  for (std::size_t l = 0; l < policy::attack_levels; ++l)
    keys.emplace_back(level_colours[l], std::string(policy::attack_level_names[l]));
  out += legend(keys);
}

void counts_table(std::string& out, const category_summary& c) {
  out += "<table><tr>";
  for (const char* h : {"requests", "admitted", "429 limited", "428 challenged", "503 under attack",
                        "403 banned", "403 denied", "401 unauthorized"})
    out += std::string("<th>") + h + "</th>";
  out += "</tr><tr>";
  const auto& d = c.outcomes;
  for (const std::uint64_t v :
       {c.requests, c.admitted, d[static_cast<int>(core::outcome::limited)],
        d[static_cast<int>(core::outcome::challenged)],
        d[static_cast<int>(core::outcome::under_attack)],
        d[static_cast<int>(core::outcome::banned)], d[static_cast<int>(core::outcome::denied)],
        d[static_cast<int>(core::outcome::unauthorized)]})
    out += "<td class=\"n\">" + std::to_string(v) + "</td>";
  out += "</tr></table>\n";
}

void changes_table(std::string& out, const run_summary& run, const category_summary& c) {
  std::string rows;
  for (const level_change_summary& l : run.changes) {
    if (l.category != c.name) continue;
    rows += "<tr><td>" + esc(format_time(l.time)) + "</td><td>" +
            std::string(policy::attack_level_names[l.from]) + " &rarr; " +
            std::string(policy::attack_level_names[l.to]) + "</td><td>" + esc(l.why) +
            "</td></tr>\n";
  }
  if (rows.empty()) {
    out += "<p class=\"note\">No change of level.</p>\n";
    return;
  }
  out +=
      "<h3>Changes of level</h3>\n<table><tr><th>time (UTC)</th><th>level</th><th>why</th></tr>\n" +
      rows + "</table>\n";
}

void category_section(std::string& out, const run_summary& run, const category_summary& c) {
  out += "<h2 id=\"category-" + esc(c.name) + "\">category " + esc(c.name) + "</h2>\n";
  out += c.attack ? "<p class=\"meta\">attack mode on</p>\n"
                  : "<p class=\"meta\">no attack mode</p>\n";
  counts_table(out, c);
  if (c.series.empty()) return;
  const std::size_t factor = factor_for(c.series.size(), max_bars);
  const std::vector<time_bucket> bars = coarser(c.series, factor);
  frame f;
  f.origin = run.series_origin;
  f.width = run.series_width * static_cast<std::int64_t>(factor);
  f.n = bars.size();
  out += "<p class=\"meta\">" + std::to_string(f.width) + " s per bar</p>\n";
  rate_chart(out, f, c, bars);
  outcome_chart(out, f, c, bars);
  if (c.attack) {
    level_band(out, f, c, bars);
    changes_table(out, run, c);
  }
}

std::string body(const report_input& in) {
  std::string out = "<h1>tollgate simulate</h1>\n<p class=\"meta\">";
  for (std::size_t i = 0; i < in.logs.file_count(); ++i)
    out += "log " + esc(in.logs.path(static_cast<std::uint32_t>(i))) + "<br>";
  const replay_result& r = in.result;
  out += std::to_string(r.requests) + " requests";
  if (r.requests > 0) {
    out += ", " + esc(format_time(r.first)) + " to " + esc(format_time(r.last)) + " (UTC)";
  }
  out += "</p>\n";
  for (std::size_t i = 0; i < in.runs.size(); ++i) {
    const run_summary& run = in.runs[i];
    out += "<h2>configuration " + std::string(in.runs.size() > 1 ? (i == 0 ? "A " : "B ") : "") +
           esc(run.file) + "</h2>\n";
    if (run.unroutable > 0) {
      out += "<p class=\"meta\">unroutable targets (400): " + std::to_string(run.unroutable) +
             "</p>\n";
    }
    for (const category_summary& c : run.categories)
      category_section(out, run, c);
  }
  return out;
}

}  // namespace

std::string html_report(const report_input& in) {
  const std::string_view page = report_page();
  const std::size_t title = page.find("{{title}}");
  const std::size_t at = page.find("{{body}}");
  std::string out;
  out.append(page.substr(0, title));
  out += "tollgate simulate: " + esc(in.runs.empty() ? std::string() : in.runs[0].file);
  out.append(page.substr(title + 9, at - title - 9));
  out += body(in);
  out.append(page.substr(at + 8));
  return out;
}

}  // namespace tollgate::sim
