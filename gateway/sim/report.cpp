#include "gateway/sim/report.hpp"

#include <algorithm>
#include <cstdio>
#include <ctime>

#include "gateway/limit/address.hpp"
#include "gateway/sim/report_series.hpp"

namespace tollgate::sim {

namespace {

using counted = std::vector<std::pair<std::string, std::uint64_t>>;

std::string address_text(const address_key& k) {
  if (!k.v6) return core::address::from_v4(static_cast<std::uint32_t>(k.low)).to_string();
  return core::address::from_v6(k.high, k.low).to_string();
}

/// The `top` largest entries of `m`, by count then by text, as (text, count).
template <typename Map, typename Text>
counted top_of(const Map& m, std::size_t top, Text text) {
  std::vector<std::pair<std::uint64_t, typename Map::key_type>> all;
  all.reserve(m.size());
  for (const auto& [k, n] : m)
    all.emplace_back(n, k);
  const std::size_t n = std::min(top, all.size());
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n), all.end(),
                    [](const auto& a, const auto& b) {
                      if (a.first != b.first) return a.first > b.first;
                      const auto& x = a.second;
                      const auto& y = b.second;
                      return std::tie(x.v6, x.high, x.low) < std::tie(y.v6, y.high, y.low);
                    });
  counted out;
  for (std::size_t i = 0; i < n; ++i)
    out.emplace_back(text(all[i].second), all[i].first);
  return out;
}

/// "(limit.tier, count)" of every non-zero entry of `by` (by limit slot and tier).
counted by_limit(const std::vector<std::array<std::uint64_t, 2>>& by,
                 const policy::category_limits& c) {
  counted out;
  for (std::size_t slot = 0; slot < by.size(); ++slot) {
    for (int t = 0; t < 2; ++t) {
      if (by[slot][t] == 0) continue;
      // A quota's rejections are counted in the short tier's place (limit_outcome).
      const std::string_view tier = c.limits[slot].is_quota()
                                        ? std::string_view("quota")
                                        : limit::tier_name(static_cast<limit::tier>(t));
      out.emplace_back(c.limits[slot].name + "." + std::string(tier), by[slot][t]);
    }
  }
  return out;
}

std::string number(std::uint64_t v) {
  return std::to_string(v);
}

/// `label: a=1, b=2` when `items` is not empty.
void text_items(std::string& out, const char* label, const counted& items) {
  if (items.empty()) return;
  out += "    ";
  out += label;
  out += ": ";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ", ";
    out += items[i].first + " " + number(items[i].second);
  }
  out += '\n';
}

void text_header(std::string& out, const report_input& in) {
  const read_counts& c = in.logs.counts();
  const replay_result& r = in.result;
  char buf[160];
  std::snprintf(buf, sizeof buf, "read %llu lines in %.2f s (%.0f lines/s)\n",
                static_cast<unsigned long long>(c.lines), in.seconds,
                in.seconds > 0 ? static_cast<double>(c.lines) / in.seconds : 0.0);
  out += buf;
  out += "requests: " + number(c.requests) + " (tollgate text " + number(c.by_format[0]) +
         ", tollgate json " + number(c.by_format[1]) + ", nginx combined " +
         number(c.by_format[2]) + "); " + number(c.reordered) + " out of time order\n";
  out += "skipped: " + number(c.application) + " application log lines, " + number(c.not_requests) +
         " tunnel ends, " + number(c.no_request) + " connections without a request, " +
         number(c.blank) + " blank lines\n";
  out += "bad lines: " + number(c.bad) + "\n";
  for (const auto& b : in.logs.bad_lines()) {
    out +=
        "  " + in.logs.path(b.file) + ":" + number(b.line) + ": " + b.reason + ": " + b.text + "\n";
  }
  if (c.bad > in.logs.bad_lines().size()) {
    out += "  (" + number(c.bad - in.logs.bad_lines().size()) + " more not listed)\n";
  }
  if (r.requests > 0) {
    out += "time: " + format_time(r.first) + " .. " + format_time(r.last) + "\n";
  }
  out += "websocket upgrades: " + number(r.upgrades) + "\n";
}

/// One configuration's categories, as a list.
void text_run(std::string& out, const run_summary& run) {
  out += "\nconfiguration " + run.file + "\n";
  if (run.unroutable > 0) {
    out += "  unroutable targets (400, not counted below): " + number(run.unroutable) + "\n";
  }
  for (const auto& c : run.categories) {
    const auto& d = c.outcomes;
    out += "  category " + c.name + ": " + number(c.requests) + " requests, " + number(c.admitted) +
           " admitted (" + number(c.exempt) + " exempt), " +
           number(d[static_cast<int>(core::outcome::limited)]) + " limited, " +
           number(d[static_cast<int>(core::outcome::challenged)]) + " challenged, " +
           number(d[static_cast<int>(core::outcome::shadow_limited)]) + " shadow-limited, " +
           number(d[static_cast<int>(core::outcome::denied)]) + " denied\n";
    text_items(out, "limited by (429 and pay-to-pass 428)", c.limited_by);
    text_items(out, "shadow-limited by", c.shadow_by);
    text_items(out, "key missing", c.unkeyed);
    text_items(out, "requests by consumer tier", c.tier_requests);
    text_items(out, "limited by consumer tier", c.tier_limited);
    text_items(out, "top limited addresses", c.top_addresses);
    text_items(out, "top limited networks", c.top_networks);
  }
}

/// `s` for a terminal: bytes a client chose, anything but printable ASCII (and the backslash)
/// as \xHH, as the access log writes them, so that a target cannot forge report lines.
std::string visible(std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u > 0x20 && u < 0x7f && c != '\\') {
      out += c;
    } else {
      out += "\\x";
      out += hex[u >> 4];
      out += hex[u & 15];
    }
  }
  return out;
}

std::string outcome_text(const difference& d, int i) {
  std::string s = d.decision[i];
  if (!d.limit[i].empty()) s += " " + d.limit[i];
  if (!d.category[i].empty()) s += " (" + d.category[i] + ")";
  return s;
}

/// The first `shown` of `list`, one line each: where, when, who, what, and both outcomes.
void text_differences(std::string& out, const report_input& in, const std::vector<difference>& list,
                      const char* a, const char* b) {
  const std::size_t n = std::min(in.listed, list.size());
  for (std::size_t i = 0; i < n; ++i) {
    const difference& d = list[i];
    out += "  " + in.logs.path(d.file) + ":" + number(d.line) + " " + format_time(d.time) + " " +
           d.client.to_string() + " " + visible(d.method) + " " + visible(d.target) + ": " + a +
           " " + outcome_text(d, 0) + ", " + b + " " + outcome_text(d, 1) + "\n";
  }
}

void text_agreement(std::string& out, const report_input& in) {
  const log_agreement& a = in.result.agreement;
  if (a.compared == 0 && a.not_comparable.empty()) return;
  out += "\nagainst the logged decisions (" + in.runs[0].file + "): " + number(a.compared) +
         " compared, " + number(a.differ) + " decided differently\n";
  for (const auto& [pair, n] : a.pairs)
    out += "  " + pair + ": " + number(n) + "\n";
  for (const auto& [d, n] : a.not_comparable) {
    out += "  not comparable (logged " + d + "): " + number(n) + "\n";
  }
  if (a.other_category > 0) {
    out += "  replayed in another category than logged: " + number(a.other_category) +
           " (routes on headers, which a log does not show, or routes changed since)\n";
  }
  text_differences(out, in, a.first, "logged", "simulated");
}

const category_summary* find(const run_summary& r, const std::string& name) {
  for (const auto& c : r.categories) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

std::uint64_t value_of(const counted& items, const std::string& name) {
  for (const auto& [k, v] : items) {
    if (k == name) return v;
  }
  return 0;
}

/// Rows "label a b" for every name either side of `pick` has.
template <typename Pick>
void rows(std::string& out, const category_summary* a, const category_summary* b, const char* label,
          Pick pick) {
  std::vector<std::string> names;
  for (const auto* c : {a, b}) {
    if (c == nullptr) continue;
    for (const auto& [k, v] : pick(*c)) {
      if (std::find(names.begin(), names.end(), k) == names.end()) names.push_back(k);
    }
  }
  for (const auto& k : names) {
    char buf[256];
    std::snprintf(buf, sizeof buf, "    %-44s %14llu %14llu\n", (label + k).c_str(),
                  static_cast<unsigned long long>(a ? value_of(pick(*a), k) : 0),
                  static_cast<unsigned long long>(b ? value_of(pick(*b), k) : 0));
    out += buf;
  }
}

/// Both configurations side by side, category by category.
void text_side_by_side(std::string& out, const run_summary& x, const run_summary& y) {
  out += "\nside by side: A = " + x.file + ", B = " + y.file + "\n";
  if (x.unroutable > 0 || y.unroutable > 0) {
    char buf[256];
    std::snprintf(buf, sizeof buf, "  %-46s %14llu %14llu\n", "unroutable targets (400, not below)",
                  static_cast<unsigned long long>(x.unroutable),
                  static_cast<unsigned long long>(y.unroutable));
    out += buf;
  }
  std::vector<std::string> names;
  for (const auto* r : {&x, &y}) {
    for (const auto& c : r->categories) {
      if (std::find(names.begin(), names.end(), c.name) == names.end()) names.push_back(c.name);
    }
  }
  for (const auto& name : names) {
    const category_summary* a = find(x, name);
    const category_summary* b = find(y, name);
    char buf[256];
    std::snprintf(buf, sizeof buf, "  category %-40s %14s %14s\n", name.c_str(), "A", "B");
    out += buf;
    rows(out, a, b, "", [](const category_summary& c) {
      const auto& d = c.outcomes;
      return counted{{"requests", c.requests},
                     {"admitted", c.admitted},
                     {"exempt", c.exempt},
                     {"limited", d[static_cast<int>(core::outcome::limited)]},
                     {"challenged", d[static_cast<int>(core::outcome::challenged)]},
                     {"shadow-limited", d[static_cast<int>(core::outcome::shadow_limited)]},
                     {"denied", d[static_cast<int>(core::outcome::denied)]}};
    });
    rows(out, a, b, "limited by ", [](const category_summary& c) { return c.limited_by; });
    rows(out, a, b, "shadow-limited by ", [](const category_summary& c) { return c.shadow_by; });
    rows(out, a, b, "key missing ", [](const category_summary& c) { return c.unkeyed; });
    rows(out, a, b, "requests, consumer tier ",
         [](const category_summary& c) { return c.tier_requests; });
    rows(out, a, b, "limited, consumer tier ",
         [](const category_summary& c) { return c.tier_limited; });
  }
}

/// Only the top lists of a run (the counts are in the side-by-side table).
void text_tops(std::string& out, const run_summary& run, const char* which) {
  out += "\n" + std::string(which) + " = " + run.file + "\n";
  for (const auto& c : run.categories) {
    if (c.top_addresses.empty()) continue;
    out += "  category " + c.name + "\n";
    text_items(out, "top limited addresses", c.top_addresses);
    text_items(out, "top limited networks", c.top_networks);
  }
}

/// The series and attack-mode settings of category `c` into `cs`.
void summarise_series(category_summary& cs, const policy::category_limits& c, const timeline& t) {
  cs.attack = c.attack.has_value();
  if (c.attack) {
    for (std::size_t l = 1; l < policy::attack_levels; ++l)
      cs.above[l] = c.attack->levels[l].on ? c.attack->levels[l].above : 0;
  }
  cs.series = t.buckets(c.index);
  cs.series.resize(t.size());
}

}  // namespace

run_summary summarise(const run_tally& t, const simulator& s, std::size_t top) {
  run_summary out;
  out.file = s.config().file;
  out.unroutable = t.unroutable;
  const auto& prefixes = s.policy().prefixes();
  for (std::size_t i = 0; i < t.categories.size(); ++i) {
    const category_tally& ct = t.categories[i];
    const policy::category_limits& c = s.policy().categories()[i];
    category_summary& cs = out.categories.emplace_back();
    cs.name = c.name;
    cs.requests = ct.requests;
    cs.admitted = ct.admitted;
    cs.exempt = ct.exempt;
    cs.outcomes = ct.outcomes;
    cs.limited_by = by_limit(ct.limited, c);
    cs.shadow_by = by_limit(ct.shadow, c);
    for (std::size_t slot = 0; slot < ct.unkeyed.size(); ++slot) {
      if (ct.unkeyed[slot] > 0) cs.unkeyed.emplace_back(c.limits[slot].name, ct.unkeyed[slot]);
    }
    for (std::size_t tier = 0; tier < ct.tier_requests.size(); ++tier) {
      const std::string& name = s.policy().tiers()->names[tier];
      if (ct.tier_requests[tier] > 0) cs.tier_requests.emplace_back(name, ct.tier_requests[tier]);
      if (ct.tier_limited[tier] > 0) cs.tier_limited.emplace_back(name, ct.tier_limited[tier]);
    }
    cs.top_addresses = top_of(ct.addresses, top, address_text);
    cs.top_networks = top_of(ct.networks, top, [&](const address_key& k) {
      return k.v6 ? limit::key_to_string(limit::level::ipv6_provider, k.high, prefixes)
                  : limit::key_to_string(limit::level::ipv4_network, k.low, prefixes);
    });
    summarise_series(cs, c, s.attack().series());
  }
  const timeline& series = s.attack().series();
  out.series_origin = series.origin();
  out.series_width = series.width();
  for (const level_change& l : series.changes) {
    out.changes.push_back({l.time, s.policy().categories()[l.category].name, l.from, l.to, l.why});
  }
  return out;
}

std::string format_time(core::nanos t) {
  const std::time_t secs = static_cast<std::time_t>(t / core::ns_per_s);
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(t % core::ns_per_s / 1000));
  return buf;
}

std::string text_report(const report_input& in) {
  std::string out;
  text_header(out, in);
  if (in.runs.size() == 1) {
    text_run(out, in.runs[0]);
    text_attack(out, in.runs[0]);
  } else {
    text_side_by_side(out, in.runs[0], in.runs[1]);
    text_tops(out, in.runs[0], "A");
    text_attack(out, in.runs[0]);
    text_tops(out, in.runs[1], "B");
    text_attack(out, in.runs[1]);
  }
  text_agreement(out, in);
  if (in.runs.size() == 2) {
    const replay_result& r = in.result;
    out += "\nrequests whose outcome differs between A and B: " + number(r.differences_total);
    if (r.differences_total > std::min(in.listed, r.differences.size())) {
      out += " (the first " + number(std::min(in.listed, r.differences.size())) + " listed)";
    }
    out += "\n";
    text_differences(out, in, r.differences, "A", "B");
  }
  return out;
}

}  // namespace tollgate::sim
