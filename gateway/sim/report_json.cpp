// The report as one JSON object, for scripts: the same summaries as the text report.

#include "gateway/core/text.hpp"
#include "gateway/sim/report.hpp"
#include "gateway/sim/report_series.hpp"

namespace tollgate::sim {

namespace {

/// A JSON writer that puts the commas in.
struct json_out {
  std::string& s;     ///< where it goes
  bool first = true;  ///< no comma before the next member

  void comma() {
    if (!first) s += ',';
    first = false;
  }
  void key(std::string_view k) {
    comma();
    s += '"';
    core::append_json_escaped(s, k, true);
    s += "\":";
  }
  void str(std::string_view k, std::string_view v) {
    key(k);
    s += '"';
    core::append_json_escaped(s, v, true);
    s += '"';
  }
  void num(std::string_view k, std::uint64_t v) {
    key(k);
    s += std::to_string(v);
  }
  void open(std::string_view k, char bracket) {
    key(k);
    s += bracket;
    first = true;
  }
  void open(char bracket) {
    comma();
    s += bracket;
    first = true;
  }
  void close(char bracket) {
    s += bracket;
    first = false;
  }
};

void counted_object(json_out& j, std::string_view name,
                    const std::vector<std::pair<std::string, std::uint64_t>>& items) {
  j.open(name, '{');
  for (const auto& [k, v] : items)
    j.num(k, v);
  j.close('}');
}

void top_list(json_out& j, std::string_view name, std::string_view what,
              const std::vector<std::pair<std::string, std::uint64_t>>& items) {
  j.open(name, '[');
  for (const auto& [k, v] : items) {
    j.open('{');
    j.str(what, k);
    j.num("count", v);
    j.close('}');
  }
  j.close(']');
}

/// `name`: [one number per bucket].
template <typename Pick>
void column(json_out& j, std::string_view name, const std::vector<time_bucket>& series, Pick pick) {
  j.open(name, '[');
  for (const time_bucket& b : series) {
    j.comma();
    j.s += pick(b);
  }
  j.close(']');
}

/// The time series of `c`, one array per quantity (docs/simulator.md).
void series(json_out& j, const run_summary& run, const category_summary& c) {
  j.open("series", '{');
  j.str("start", format_time(run.series_origin * core::ns_per_s));
  j.num("bucket_seconds", static_cast<std::uint64_t>(run.series_width));
  auto count = [](std::uint64_t v) { return std::to_string(v); };
  column(j, "requests", c.series, [&](const time_bucket& b) { return count(b.requests); });
  column(j, "admitted", c.series, [&](const time_bucket& b) { return count(b.admitted); });
  for (std::size_t d = 0; d < core::outcome_count; ++d) {
    const auto o = static_cast<core::outcome>(d);
    if (o == core::outcome::error) continue;  // as above: a replay has no store to fail
    column(j, core::outcome_name(o), c.series,
           [&](const time_bucket& b) { return count(of(b, o)); });
  }
  column(j, "peak_per_second", c.series, [&](const time_bucket& b) { return count(b.peak); });
  if (c.attack) {
    column(j, "baseline", c.series, [](const time_bucket& b) {
      return b.ticks == 0 ? std::string("null") : rate_text(b.baseline());
    });
    column(j, "level", c.series, [&](const time_bucket& b) { return count(b.level); });
  }
  j.close('}');
}

void attack_settings(json_out& j, const category_summary& c) {
  if (!c.attack) {
    j.key("attack_mode");
    j.s += "null";
    return;
  }
  j.open("attack_mode", '{');
  for (std::size_t l = 1; l < policy::attack_levels; ++l) {
    if (c.above[l] == 0) continue;
    j.key(policy::attack_level_names[l]);
    j.s += rate_text(c.above[l]);
  }
  j.close('}');
}

void changes(json_out& j, const run_summary& run) {
  j.open("attack_changes", '[');
  for (const level_change_summary& c : run.changes) {
    j.open('{');
    j.str("time", format_time(c.time));
    j.str("category", c.category);
    j.str("from", policy::attack_level_names[c.from]);
    j.str("to", policy::attack_level_names[c.to]);
    j.str("why", c.why);
    j.close('}');
  }
  j.close(']');
}

void category(json_out& j, const run_summary& run, const category_summary& c) {
  j.open(c.name, '{');
  j.num("requests", c.requests);
  j.num("admitted", c.admitted);
  j.num("exempt", c.exempt);
  for (std::size_t d = 0; d < core::outcome_count; ++d) {
    const auto o = static_cast<core::outcome>(d);
    // A replay has no store to fail: no `error` (the report's keys stay those it had).
    if (o != core::outcome::error) j.num(core::outcome_name(o), c.outcomes[d]);
  }
  counted_object(j, "limited_by", c.limited_by);
  counted_object(j, "shadow_limited_by", c.shadow_by);
  counted_object(j, "unkeyed", c.unkeyed);
  counted_object(j, "requests_by_consumer_tier", c.tier_requests);
  counted_object(j, "limited_by_consumer_tier", c.tier_limited);
  top_list(j, "top_addresses", "address", c.top_addresses);
  top_list(j, "top_networks", "network", c.top_networks);
  attack_settings(j, c);
  series(j, run, c);
  j.close('}');
}

void difference_object(json_out& j, const report_input& in, const difference& d) {
  j.open('{');
  j.str("file", in.logs.path(d.file));
  j.num("line", d.line);
  j.str("time", format_time(d.time));
  j.str("client", d.client.to_string());
  j.str("method", d.method);
  j.str("target", d.target);
  for (int i = 0; i < 2; ++i) {
    j.open(i == 0 ? "a" : "b", '{');
    j.str("category", d.category[i]);
    j.str("decision", d.decision[i]);
    j.str("limit", d.limit[i]);
    j.close('}');
  }
  j.close('}');
}

void header(json_out& j, const report_input& in) {
  const read_counts& c = in.logs.counts();
  j.num("lines", c.lines);
  j.num("requests", c.requests);
  j.open("formats", '{');
  j.num("tollgate_text", c.by_format[0]);
  j.num("tollgate_json", c.by_format[1]);
  j.num("nginx_combined", c.by_format[2]);
  j.close('}');
  j.open("skipped", '{');
  j.num("application", c.application);
  j.num("tunnel_end", c.not_requests);
  j.num("no_request", c.no_request);
  j.num("blank", c.blank);
  j.close('}');
  j.open("bad_lines", '{');
  j.num("count", c.bad);
  j.open("first", '[');
  for (const auto& b : in.logs.bad_lines()) {
    j.open('{');
    j.str("file", in.logs.path(b.file));
    j.num("line", b.line);
    j.str("reason", b.reason);
    j.str("text", b.text);
    j.close('}');
  }
  j.close(']');
  j.close('}');
  j.num("reordered", c.reordered);
  j.num("upgrades", in.result.upgrades);
  j.str("first_time", in.result.requests ? format_time(in.result.first) : "");
  j.str("last_time", in.result.requests ? format_time(in.result.last) : "");
  j.key("seconds");
  j.s += std::to_string(in.seconds);
}

void agreement(json_out& j, const report_input& in) {
  const log_agreement& a = in.result.agreement;
  j.open("logged", '{');
  j.num("compared", a.compared);
  j.num("differ", a.differ);
  j.num("other_category", a.other_category);
  j.open("pairs", '{');
  for (const auto& [k, v] : a.pairs)
    j.num(k, v);
  j.close('}');
  j.open("not_comparable", '{');
  for (const auto& [k, v] : a.not_comparable)
    j.num(k, v);
  j.close('}');
  j.open("first", '[');
  for (const auto& d : a.first)
    difference_object(j, in, d);
  j.close(']');
  j.close('}');
}

}  // namespace

std::string json_report(const report_input& in) {
  std::string out;
  json_out j{out};
  j.open('{');
  header(j, in);
  j.open("configurations", '[');
  for (const auto& run : in.runs) {
    j.open('{');
    j.str("file", run.file);
    j.num("unroutable", run.unroutable);
    j.open("categories", '{');
    for (const auto& c : run.categories)
      category(j, run, c);
    j.close('}');
    changes(j, run);
    j.close('}');
  }
  j.close(']');
  agreement(j, in);
  if (in.runs.size() == 2) {
    j.open("differences", '{');
    j.num("total", in.result.differences_total);
    j.open("listed", '[');
    for (const auto& d : in.result.differences)
      difference_object(j, in, d);
    j.close(']');
    j.close('}');
  }
  j.close('}');
  out += '\n';
  return out;
}

}  // namespace tollgate::sim
