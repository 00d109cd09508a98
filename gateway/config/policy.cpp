#include "gateway/config/policy.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <unordered_map>

#include "gateway/config/yaml_reader.hpp"
#include "gateway/core/client_certificate.hpp"
#include "gateway/core/key_block.hpp"
#include "gateway/core/text.hpp"

namespace tollgate::config {

namespace {

using core::tier;

using core::max_burst;
using core::max_keyed_limits;

/// A reason named by status_violations, checked once every file is read.
struct reason_reference {
  std::string file;
  int line;
  std::string path;
  std::string reason;
};

/// State of a multi-file load.
struct loader {
  policy_config policy;
  std::vector<reason_reference> references;
  std::string levels_file;        ///< where `levels` was set, if anywhere
  std::string pow_counters_file;  ///< where `pow_counters` was set, if anywhere
  std::string tiers_file;         ///< where `tiers` was set, if anywhere
  std::string penalties_file;     ///< where `penalties` was set, if anywhere
  bool host = false;              ///< a host entry's files: categories and tiers only
  /// Where each category and each reason was defined: looked up once per name, so that a
  /// file of many thousands of them loads in time linear in its size.
  std::unordered_map<std::string, std::string> category_files, violation_files;
};

std::uint32_t as_u32(const yaml_node& n, std::uint32_t min, std::uint32_t max) {
  return static_cast<std::uint32_t>(n.as_uint(min, max));
}

tier_config read_tier(const yaml_node& n) {
  n.expect_keys({"rate", "burst"});
  return {n.at("rate").as_rate(), as_u32(n.at("burst"), 1, max_burst)};
}

bool valid_key_name(const std::string& s) {
  // Query parameter and cookie names: RFC 6265 token characters, which cover what forms use.
  return !s.empty() && s.size() <= 128 && std::all_of(s.begin(), s.end(), [](char c) {
    return c > 0x20 && c < 0x7f &&
           std::string_view("()<>@,;:\\\"/[]?={}").find(c) == std::string_view::npos;
  });
}

/// A claim path: names of `[A-Za-z0-9_:-]` joined by dots (`sub`, `org.plan`).
bool valid_claim_path(const std::string& s) {
  if (s.empty() || s.size() > 128 || s.front() == '.' || s.back() == '.') return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '.' && s[i + 1] == '.') return false;
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum && c != '_' && c != '-' && c != ':' && c != '.') return false;
  }
  return true;
}

/// One key: `global`, `individual`, `network`, or one of `{header: NAME}`, `{query: NAME}`,
/// `{cookie: NAME}`, `{bearer: true}`, `{jwt_claim: PATH}`, `{client_cert: subject | san |
/// sha256}`. `in_composite`: a part of a list.
key_part_config read_key_part(const yaml_node& n, bool in_composite) {
  if (!n.is_map()) {
    const std::string word = n.as_string();
    if (word == "individual") return {core::key_source::individual, {}};
    if (word == "network") return {core::key_source::network, {}};
    if (word == "global" && !in_composite) return {core::key_source::global, {}};
    n.fail(in_composite ? "expected individual, network, or a map with header, query, cookie, "
                          "bearer, jwt_claim or client_cert"
                        : "expected global, individual, network, a map with header, query, "
                          "cookie, bearer, jwt_claim or client_cert, or a list of these (a "
                          "composite key)");
  }
  n.expect_keys({"header", "query", "cookie", "bearer", "jwt_claim", "client_cert"});
  const auto entries = n.entries();
  if (entries.size() != 1) {
    n.fail("name exactly one of header, query, cookie, bearer, jwt_claim, client_cert");
  }
  const auto& [kind, value] = entries.front();
  if (kind == "bearer") {
    if (!value.as_bool()) value.fail("bearer: true is the only form");
    return {core::key_source::bearer, {}};
  }
  key_part_config part{core::key_source::header, value.as_string()};
  if (kind == "header") {
    if (!valid_header_name(part.name)) value.fail("invalid header name '" + part.name + "'");
    return part;
  }
  if (kind == "jwt_claim") {
    part.source = core::key_source::claim;
    if (!valid_claim_path(part.name)) {
      value.fail("invalid claim path '" + part.name +
                 "' (names of A-Z a-z 0-9 _ : - joined by dots)");
    }
    return part;
  }
  if (kind == "client_cert") {
    // A fact of the client's verified certificate (docs/design.md §17).
    part.source = core::key_source::client_cert;
    if (!core::certificate_field_from_name(part.name)) {
      value.fail("expected subject, san or sha256, not '" + part.name + "'");
    }
    return part;
  }
  part.source = kind == "query" ? core::key_source::query : core::key_source::cookie;
  if (!valid_key_name(part.name)) value.fail("invalid " + kind + " name '" + part.name + "'");
  return part;
}

/// The `key` of a limit: one part, or a list of two to four (docs/design.md §15: one bucket per
/// combination; a request missing any part is not limited by it).
void read_key(const yaml_node& n, limit_config& out) {
  if (!n.is_sequence()) {
    const key_part_config part = read_key_part(n, false);
    out.key = part.source;
    out.key_name = part.name;
    if (part.source == core::key_source::individual || part.source == core::key_source::network) {
      // The client's address at the fine or the coarse level of its family: kept with that
      // level's keys (its table, its Redis hash tag).
      out.part = part.source == core::key_source::individual ? core::address_part::individual
                                                             : core::address_part::network;
      out.key = core::key_source::address;
    }
    return;
  }
  const auto items = n.items();
  if (items.size() < 2 || items.size() > 4) n.fail("a composite key has two to four parts");
  out.key = core::key_source::composite;
  for (const yaml_node& i : items) {
    key_part_config part = read_key_part(i, true);
    for (const key_part_config& p : out.parts) {
      if (p.source == part.source && p.name == part.name) i.fail("a part named twice");
    }
    out.parts.push_back(std::move(part));
  }
}

/// A limit's `quota`: `{limit: N, period: day|week|month, tiered: bool}`.
quota_config read_quota(const yaml_node& n) {
  n.expect_keys({"limit", "period", "tiered"});
  quota_config q;
  q.limit = as_u32(n.at("limit"), 1, UINT32_MAX);
  const yaml_node period = n.at("period");
  const std::string p = period.as_string();
  const auto parsed = core::period_from_name(p);
  if (!parsed) period.fail("expected day, week or month, got '" + p + "'");
  q.period = *parsed;
  if (auto t = n.get("tiered")) q.tiered = t->as_bool();
  return q;
}

/// `on_excess: { delay: 500ms, max_delayed: 1000 }` (docs/design.md §16).
on_excess_config read_on_excess(const yaml_node& n) {
  n.expect_keys({"delay", "max_delayed"});
  on_excess_config out;
  const yaml_node delay = n.at("delay");
  out.delay = delay.as_duration();
  if (out.delay < std::chrono::milliseconds(1) || out.delay > std::chrono::minutes(1)) {
    delay.fail("expected 1ms to 1m");
  }
  if (auto m = n.get("max_delayed")) out.max_delayed = as_u32(*m, 1, 1'000'000);
  return out;
}

/// One entry of a category's `limits`: an address level by its own name; the older spellings
/// `identity: {header: ...}` and `global: {...}`; or any name with a `key`.
limit_config read_limit(const std::string& name, const yaml_node& n) {
  limit_config out;
  out.name = name;
  out.line = n.line();
  if (!valid_name(name)) n.fail("invalid limit name (use a-z, 0-9, _ and -)");
  const auto address = core::level_from_name(name);
  if (address) {
    n.expect_keys({"short", "long", "shadow", "on_excess"});
    out.address_level = *address;
  } else if (name == "identity" && !n.get("key")) {
    n.expect_keys({"header", "short", "long", "quota", "shadow", "on_excess"});
    out.key = core::key_source::header;
    const yaml_node h = n.at("header");
    out.key_name = h.as_string();
    if (!valid_header_name(out.key_name)) h.fail("invalid header name '" + out.key_name + "'");
  } else if (name == "global" && !n.get("key")) {
    n.expect_keys({"short", "long", "quota", "shadow", "on_excess"});
    out.key = core::key_source::global;
  } else {
    n.expect_keys({"key", "short", "long", "quota", "concurrency", "shadow", "on_excess"});
    const auto key = n.get("key");
    if (!key) {
      n.fail("limit '" + name +
             "' needs a key (header, query, cookie, bearer, jwt_claim, client_cert, individual, "
             "network or global, or a list of these), or the name of an "
             "address level (ipv4_individual, ipv4_network, ipv6_subnet, ipv6_provider)");
    }
    read_key(*key, out);
  }
  if (auto s = n.get("short")) out.tiers[0] = read_tier(*s);
  if (auto s = n.get("long")) out.tiers[1] = read_tier(*s);
  if (auto c = n.get("concurrency")) {
    if (out.tiers[0] || out.tiers[1] || n.get("quota")) {
      c->fail(
          "a concurrency limit has no rate tiers (short, long) nor quota: give it a limit of "
          "its own");
    }
    if (out.key == core::key_source::global) c->fail("a concurrency limit is keyed, not global");
    out.concurrency = as_u32(*c, 1, 1'000'000);
  } else if (auto q = n.get("quota")) {
    if (out.tiers[0] || out.tiers[1]) {
      q->fail(
          "a limit is either a quota or rate tiers (short, long), not both: give the quota a "
          "limit of its own");
    }
    out.quota = read_quota(*q);
  } else if (!out.tiers[0] && !out.tiers[1]) {
    n.fail("a limit needs a short tier, a long tier or both (or a quota, or a concurrency)");
  }
  if (auto s = n.get("shadow")) out.shadow = s->as_bool();
  if (auto e = n.get("on_excess")) {
    if (!out.tiers[0] && !out.tiers[1]) {
      e->fail(
          "on_excess holds requests of rate tiers (short, long), not of a quota or a concurrency");
    }
    out.on_excess = read_on_excess(*e);
  }
  return out;
}

pow_config read_pow(const yaml_node& n) {
  n.expect_keys({"enabled", "base_bits", "step_bits", "max_bits", "on_limit", "on_limit_bits"});
  pow_config p;
  if (auto v = n.get("enabled")) p.enabled = v->as_bool();
  if (auto v = n.get("base_bits")) p.base_bits = as_u32(*v, 1, 64);
  if (auto v = n.get("step_bits")) p.step_bits = as_u32(*v, 0, 64);
  if (auto v = n.get("max_bits")) p.max_bits = as_u32(*v, 1, 64);
  if (auto v = n.get("on_limit")) p.on_limit = v->as_bool();
  if (auto v = n.get("on_limit_bits")) p.on_limit_bits = as_u32(*v, 1, 64);
  if (p.base_bits > p.max_bits) {
    n.fail("base_bits " + std::to_string(p.base_bits) + " exceeds max_bits " +
           std::to_string(p.max_bits));
  }
  return p;
}

websocket_config read_websocket(const yaml_node& n) {
  n.expect_keys({"max_message_size", "messages", "on_excess", "max_lifetime", "idle_timeout",
                 "max_connections_per_address", "pings"});
  websocket_config w;
  if (auto v = n.get("max_message_size")) {
    w.max_message_size = v->as_size();
    if (w.max_message_size == 0) v->fail("must be at least 1 byte");
  }
  if (auto m = n.get("messages")) {
    m->expect_keys({"rate", "burst", "cost"});
    w.messages = tier_config{m->at("rate").as_rate(), as_u32(m->at("burst"), 1, max_burst)};
    if (auto c = m->get("cost")) {
      const std::string s = c->as_string();
      if (s == "per_message") {
        w.cost = message_cost::per_message;
      } else if (s == "per_kib") {
        w.cost = message_cost::per_kib;
      } else {
        c->fail("expected per_message or per_kib, got '" + s + "'");
      }
    }
  }
  if (auto v = n.get("on_excess")) {
    const std::string s = v->as_string();
    if (s == "close") {
      w.on_excess = excess_action::close;
    } else if (s == "drop") {
      w.on_excess = excess_action::drop;
    } else {
      v->fail("expected close or drop, got '" + s + "'");
    }
  }
  if (auto v = n.get("max_lifetime")) w.max_lifetime = v->as_duration();
  if (auto v = n.get("idle_timeout")) w.idle_timeout = v->as_duration();
  if (auto v = n.get("max_connections_per_address")) {
    w.max_connections_per_address = as_u32(*v, 1, 1'000'000);
  }
  if (auto p = n.get("pings")) {
    p->expect_keys({"rate", "burst"});
    w.pings = tier_config{p->at("rate").as_rate(), as_u32(p->at("burst"), 1, max_burst)};
  }
  return w;
}

/// A token of RFC 9110 §5.6.2 (a method or a field name).
bool is_token(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
  });
}

/// An origin as browsers send it: scheme "://" host [":" port], lower case, no path.
bool is_origin(std::string_view s) {
  const auto sep = s.find("://");
  if (sep == std::string_view::npos || sep == 0) return false;
  const std::string_view scheme = s.substr(0, sep), rest = s.substr(sep + 3);
  const auto lower_or = [](std::string_view v, std::string_view extra) {
    return !v.empty() && std::all_of(v.begin(), v.end(), [&](char c) {
      return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
             extra.find(c) != std::string_view::npos;
    });
  };
  return lower_or(scheme, "+-.") && lower_or(rest, "-.:[]_");
}

cors_config read_cors(const yaml_node& n) {
  n.expect_keys({"allow_origins", "allow_credentials", "allow_methods", "allow_headers",
                 "expose_headers", "max_age"});
  cors_config c;
  const yaml_node origins = n.at("allow_origins");
  for (const yaml_node& o : origins.items()) {
    std::string v = o.as_string();
    if (v != "*" && !is_origin(v)) {
      o.fail("invalid origin '" + v + "' (expected \"*\" or scheme://host[:port] in lower case)");
    }
    if (v.starts_with("https://") && v.ends_with(":443")) {
      o.fail("origin '" + v + "' names the default port, which browsers leave out: write '" +
             v.substr(0, v.size() - 4) + "'");
    }
    if (v.starts_with("http://") && v.ends_with(":80")) {
      o.fail("origin '" + v + "' names the default port, which browsers leave out: write '" +
             v.substr(0, v.size() - 3) + "'");
    }
    c.allow_origins.push_back(std::move(v));
  }
  if (c.allow_origins.empty()) origins.fail("at least one origin is needed");
  if (auto v = n.get("allow_credentials")) c.allow_credentials = v->as_bool();
  const bool any =
      std::find(c.allow_origins.begin(), c.allow_origins.end(), "*") != c.allow_origins.end();
  if (any && c.allow_credentials) {
    origins.fail(
        "\"*\" cannot be combined with allow_credentials (browsers refuse it): list the origins");
  }
  const auto tokens = [](const yaml_node& list, const char* what) {
    std::vector<std::string> out;
    for (const yaml_node& t : list.items()) {
      std::string v = t.as_string();
      if (!is_token(v)) t.fail(std::string("invalid ") + what + " '" + v + "'");
      out.push_back(std::move(v));
    }
    return out;
  };
  if (auto v = n.get("allow_methods")) c.allow_methods = tokens(*v, "method");
  if (auto v = n.get("allow_headers")) c.allow_headers = tokens(*v, "header name");
  if (auto v = n.get("expose_headers")) c.expose_headers = tokens(*v, "header name");
  if (auto v = n.get("max_age")) {
    c.max_age = v->as_duration();
    if (c.max_age > std::chrono::hours(24)) v->fail("at most 24h (browsers cap it lower still)");
  }
  return c;
}

/// A number from `min` to `max` (a factor).
double as_factor(const yaml_node& n, double min, double max, const std::string& problem) {
  double m = -1;
  try {
    std::size_t used = 0;
    const std::string text = n.as_string();
    m = std::stod(text, &used);
    if (used != text.size()) m = -1;
  } catch (const std::exception&) {
    m = -1;
  }
  if (!(m >= min && m <= max)) n.fail(problem);
  return m;
}

/// A multiple of the baseline such as `2x` or `2.5x`, from 1.1x to 100000x.
double read_multiple(const yaml_node& n) {
  constexpr double min = 1.1, max = 100000;
  std::string text = n.as_string();
  double m = -1;
  if (!text.empty() && text.back() == 'x') {
    text.pop_back();
    try {
      std::size_t used = 0;
      m = std::stod(text, &used);
      if (used != text.size()) m = -1;
    } catch (const std::exception&) {
      m = -1;
    }
  }
  if (!(m >= min && m <= max)) {
    n.fail("expected a multiple of the baseline such as 2x, from 1.1x to 100000x");
  }
  return m;
}

/// `attack_mode` of a category whose proof-of-work settings are `pow`.
attack_mode_config read_attack_mode(const yaml_node& n, const pow_config& pow) {
  n.expect_keys({"baseline", "sustain", "levels", "cool_down", "restore"});
  attack_mode_config a;
  a.line = n.key_line();
  if (auto b = n.get("baseline")) {
    b->expect_keys({"window", "floor"});
    if (auto w = b->get("window")) {
      a.window = w->as_duration();
      if (a.window < std::chrono::seconds(10) || a.window > std::chrono::hours(24 * 30)) {
        w->fail("must be from 10s to 720h");
      }
    }
    if (auto f = b->get("floor")) {
      const core::rate r = f->as_rate();
      a.floor = static_cast<double>(r.count) * 1e9 / static_cast<double>(r.period);
    }
  }
  auto duration = [](const yaml_node& d, core::duration min, core::duration max,
                     const char* range) {
    const core::duration v = d.as_duration();
    if (v < min || v > max) d.fail(std::string("must be from ") + range);
    return v;
  };
  if (auto s = n.get("sustain")) {
    a.sustain = duration(*s, std::chrono::seconds(1), std::chrono::hours(1), "1s to 1h");
  }
  if (auto c = n.get("cool_down")) {
    a.cool_down = duration(*c, std::chrono::seconds(4), std::chrono::hours(24), "4s to 24h");
  }
  if (auto r = n.get("restore")) {
    std::string text = r->as_string();
    const bool percent = !text.empty() && text.back() == '%';
    if (percent) text.pop_back();
    const auto v = core::parse_uint(text, 100);
    if (!percent || !v || *v == 0)
      r->fail("expected a share of the way such as 25%, from 1% to 100%");
    a.restore = static_cast<double>(*v) / 100.0;
  }
  const yaml_node levels = n.at("levels");
  levels.expect_keys({"elevated", "high", "severe"});
  const char* const names[] = {"elevated", "high", "severe"};
  double below = 1;  // the level under this one's `above`
  for (std::size_t i = 0; i < 3; ++i) {
    const auto l = levels.get(names[i]);
    if (!l) continue;
    l->expect_keys({"above", "limits", "pow", "admit"});
    attack_level_config& c = a.levels[i];
    c.set = true;
    c.line = l->line();
    const yaml_node above = l->at("above");
    c.above = read_multiple(above);
    if (c.above <= below) above.fail("each level's `above` is higher than the level's below it");
    below = c.above;
    if (auto f = l->get("limits")) {
      c.limits = as_factor(*f, 0.01, 1, "a limits factor is a number from 0.01 to 1");
      c.limits_given = true;
    }
    if (auto p = l->get("pow")) {
      if (p->as_string() != "uncleared")
        p->fail("expected uncleared (clients without a clearance show a proof)");
      if (!pow.enabled) {
        p->fail("pow: uncleared asks proofs, which this category does not: set pow.enabled");
      }
      c.pow = true;
    }
    if (auto ad = l->get("admit")) {
      c.admit_only = true;
      for (const yaml_node& item : ad->items()) {
        const std::string s = item.as_string();
        if (s == "allowed") {
          c.admit_allowed = true;
        } else if (s == "cleared") {
          if (!pow.enabled)
            item.fail(
                "clearances come from proofs, which this category does not ask: set pow.enabled");
          c.admit_cleared = true;
        } else {
          item.fail("expected allowed or cleared, got '" + s + "'");
        }
      }
    }
  }
  if (!a.levels[0].set && !a.levels[1].set && !a.levels[2].set) {
    levels.fail("name at least one of elevated, high, severe");
  }
  return a;
}

category_config read_category(const std::string& name, const yaml_node& n, loader& ld) {
  n.expect_keys({"cost", "mode", "limits", "unlimited", "pow", "status_violations", "websocket",
                 "cors", "attack_mode"});
  category_config c;
  c.name = name;
  c.file = n.file();
  c.line = n.key_line();
  if (auto u = n.get("unlimited")) c.unlimited = u->as_bool();
  std::optional<yaml_node> cost_node = n.get("cost");
  if (cost_node) c.cost = as_u32(*cost_node, 1, max_burst);
  if (auto mode = n.get("mode")) {
    const std::string m = mode->as_string();
    if (m != "enforce" && m != "shadow") mode->fail("expected enforce or shadow, got '" + m + "'");
    c.shadow = m == "shadow";
  }
  if (auto limits = n.get("limits")) {
    std::size_t keyed = 0;
    for (const auto& [limit_name, value] : limits->entries()) {
      limit_config l = read_limit(limit_name, value);
      if (l.key != core::key_source::address && ++keyed > max_keyed_limits) {
        value.fail("more than " + std::to_string(max_keyed_limits) +
                   " limits not keyed on the address in one category");
      }
      c.limits.push_back(std::move(l));
    }
  }
  if (auto p = n.get("pow")) c.pow = read_pow(*p);
  if (auto sv = n.get("status_violations")) {
    for (const auto& [status_text, value] : sv->entries()) {
      const auto status = core::parse_uint(status_text, 599);
      if (!status || *status < 100) value.fail("expected an HTTP status from 100 to 599");
      const std::string reason = value.as_string();
      c.status_violations[static_cast<int>(*status)] = reason;
      ld.references.push_back({value.file(), value.line(), value.path(), reason});
    }
  }
  if (auto w = n.get("websocket")) c.websocket = read_websocket(*w);
  if (auto w = n.get("cors")) c.cors = read_cors(*w);
  if (auto a = n.get("attack_mode")) c.attack_mode = read_attack_mode(*a, c.pow);
  // A request dearer than a burst could never pass: say so now rather than reject forever.
  if (const std::string fault = cost_fault(c, c.cost); !fault.empty()) cost_node->fail(fault);
  return c;
}

violation_config read_violation(const std::string& name, const yaml_node& n) {
  n.expect_keys({"levels", "ban"});
  violation_config v;
  v.name = name;
  const yaml_node levels = n.at("levels");
  for (const yaml_node& item : levels.items()) {
    const std::string s = item.as_string();
    if (s == "individual") {
      v.individual = true;
    } else if (s == "network") {
      v.network = true;
    } else {
      item.fail("expected individual or network, got '" + s + "'");
    }
  }
  if (!v.individual && !v.network) levels.fail("name at least one of individual, network");
  if (auto b = n.get("ban")) {
    b->expect_keys({"threshold", "duration", "max_duration"});
    ban_config ban;
    ban.threshold = as_u32(b->at("threshold"), 1, 1'000'000);
    const yaml_node duration = b->at("duration");
    ban.duration = duration.as_duration();
    if (ban.duration <= core::duration::zero()) duration.fail("must be longer than 0");
    ban.max_duration = std::max(ban.max_duration, ban.duration);
    if (auto m = b->get("max_duration")) {
      ban.max_duration = m->as_duration();
      if (ban.max_duration < ban.duration) m->fail("must be at least the ban's duration");
    }
    v.ban = ban;
  }
  return v;
}

pow_counters_config read_pow_counters(const yaml_node& n) {
  n.expect_keys({"max_counter", "decay_interval", "max_individual_entries", "max_network_entries",
                 "network_min_sources"});
  pow_counters_config p;
  if (auto v = n.get("max_counter")) p.max_counter = as_u32(*v, 1, 1000);
  if (auto v = n.get("decay_interval")) {
    p.decay_interval = v->as_duration();
    if (p.decay_interval <= core::duration::zero()) v->fail("must be longer than 0");
  }
  if (auto v = n.get("max_individual_entries")) {
    p.max_individual_entries = as_u32(*v, 1, 100'000'000);
  }
  if (auto v = n.get("max_network_entries")) p.max_network_entries = as_u32(*v, 1, 100'000'000);
  if (auto v = n.get("network_min_sources")) {
    p.network_min_sources = as_u32(*v, 1, 64);  // each is remembered per network entry
  }
  return p;
}

prefixes_config read_levels(const yaml_node& n) {
  n.expect_keys({"ipv4_individual", "ipv4_network", "ipv6_subnet", "ipv6_provider"});
  prefixes_config p;
  auto read = [&](const char* key, std::uint8_t& out, std::uint32_t max) {
    if (auto v = n.get(key)) out = static_cast<std::uint8_t>(v->as_uint(1, max));
  };
  read("ipv4_individual", p.ipv4_individual, 32);
  read("ipv4_network", p.ipv4_network, 32);
  read("ipv6_subnet", p.ipv6_subnet, 64);
  read("ipv6_provider", p.ipv6_provider, 64);
  if (p.ipv4_network > p.ipv4_individual) {
    n.fail("ipv4_network prefix /" + std::to_string(p.ipv4_network) +
           " is longer than ipv4_individual /" + std::to_string(p.ipv4_individual));
  }
  if (p.ipv6_provider > p.ipv6_subnet) {
    n.fail("ipv6_provider prefix /" + std::to_string(p.ipv6_provider) +
           " is longer than ipv6_subnet /" + std::to_string(p.ipv6_subnet));
  }
  return p;
}

/// A file named in a policy, relative to the policy file.
std::string policy_relative(const yaml_node& n, const std::string& base) {
  namespace fs = std::filesystem;
  const fs::path p(n.as_string());
  if (p.is_absolute()) return p.string();
  return (fs::path(base).parent_path() / p).lexically_normal().string();
}

/// The lines of text file `path` named at `n`, "#" comments and blank lines left out.
std::vector<std::pair<int, std::string>> read_lines(const yaml_node& n, const std::string& path) {
  std::ifstream in(path);
  if (!in) n.fail("cannot read file '" + path + "'");
  std::vector<std::pair<int, std::string>> out;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (const auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    const std::string_view t = core::trim(line);
    if (!t.empty()) out.emplace_back(number, std::string(t));
  }
  return out;
}

tier_source_config read_tier_source(const yaml_node& n, const std::string& file,
                                    const tiers_config& t) {
  tier_source_config src;
  src.line = n.line();
  if (!n.is_map()) {
    const std::string word = n.as_string();
    if (word == "upstream") {
      src.source = tier_source_config::kind::upstream;
      return src;
    }
    if (word == "override") {
      src.source = tier_source_config::kind::overrides;
      return src;
    }
    n.fail("expected override, jwt_claim, key_file, network or upstream");
  }
  n.expect_keys({"jwt_claim", "key_file", "network"});
  const auto entries = n.entries();
  if (entries.size() != 1) n.fail("name exactly one of jwt_claim, key_file, network");
  const auto& [kind, value] = entries.front();
  auto known = [&](const yaml_node& at, const std::string& tier) {
    for (const auto& [name, m] : t.multipliers)
      if (name == tier) return;
    at.fail("unknown tier '" + tier + "' (not in tiers.multipliers)");
  };
  if (kind == "jwt_claim") {
    src.source = tier_source_config::kind::jwt_claim;
    src.claim = value.as_string();
    if (!valid_claim_path(src.claim)) value.fail("invalid claim path '" + src.claim + "'");
    return src;
  }
  if (kind == "network") {
    src.source = tier_source_config::kind::network;
    value.expect_keys({"file", "tier"});
    const yaml_node f = value.at("file");
    src.file = policy_relative(f, file);
    src.tier = value.at("tier").as_string();
    known(value.at("tier"), src.tier);
    for (const auto& [number, text] : read_lines(f, src.file)) {
      const auto c = core::cidr::parse(text);
      if (!c) {
        throw error(src.file, number, "", "invalid CIDR '" + text + "' (expected e.g. 10.0.0.0/8)");
      }
      src.networks.push_back(*c);
    }
    return src;
  }
  src.source = tier_source_config::kind::key_file;
  value.expect_keys({"file", "key", "unknown"});
  const yaml_node f = value.at("file");
  src.file = policy_relative(f, file);
  src.key = read_key_part(value.at("key"), true);
  if (src.key.source == core::key_source::individual ||
      src.key.source == core::key_source::network) {
    value.at("key").fail(
        "a key file is keyed on a header, query, cookie, bearer, jwt_claim or client_cert");
  }
  if (auto u = value.get("unknown")) {
    const std::string w = u->as_string();
    if (w != "default" && w != "reject") u->fail("expected default or reject, not '" + w + "'");
    src.reject_unknown = w == "reject";
  }
  std::error_code ec;
  if (!std::filesystem::is_regular_file(src.file, ec))
    f.fail("cannot read file '" + src.file + "'");
  const yaml_node keys = load_yaml_file(src.file);
  if (!keys.is_null()) {
    for (const auto& [key, tier] : keys.entries()) {
      const std::string name = tier.as_string();
      known(tier, name);
      if (key.starts_with("sha256:") &&
          (key.size() != 7 + 64 || !std::all_of(key.begin() + 7, key.end(), [](char c) {
             return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
           }))) {
        tier.fail("a hashed key is sha256: and 64 lower-case hex digits");
      }
      src.keys.emplace_back(key, name);
    }
  }
  return src;
}

tiers_config read_tiers(const yaml_node& n) {
  n.expect_keys({"multipliers", "default", "from", "pow_bits", "tier_ttl"});
  tiers_config t;
  t.file = n.file();
  t.line = n.key_line();
  for (const auto& [name, value] : n.at("multipliers").entries()) {
    if (!valid_name(name)) value.fail("invalid tier name (use a-z, 0-9, _ and -)");
    double m = 0;
    try {
      std::size_t used = 0;
      const std::string text = value.as_string();
      m = std::stod(text, &used);
      if (used != text.size()) m = -1;
    } catch (const std::exception&) {
      m = -1;
    }
    if (!(m >= 0.01 && m <= 1000)) value.fail("a multiplier is a number from 0.01 to 1000");
    t.multipliers.emplace_back(name, m);
  }
  if (t.multipliers.empty()) n.at("multipliers").fail("name at least one tier");
  if (t.multipliers.size() > 16) n.at("multipliers").fail("at most 16 tiers");
  const yaml_node d = n.at("default");
  t.default_tier = d.as_string();
  if (std::none_of(t.multipliers.begin(), t.multipliers.end(),
                   [&](const auto& m) { return m.first == t.default_tier; })) {
    d.fail("unknown tier '" + t.default_tier + "' (not in tiers.multipliers)");
  }
  if (auto f = n.get("from")) {
    for (const yaml_node& i : f->items())
      t.from.push_back(read_tier_source(i, n.file(), t));
  }
  if (auto b = n.get("pow_bits")) {
    for (const auto& entry : b->entries()) {
      const std::string& name = entry.first;  // a plain name: clang 14 captures no binding
      const yaml_node& value = entry.second;
      if (std::none_of(t.multipliers.begin(), t.multipliers.end(),
                       [&](const auto& m) { return m.first == name; })) {
        value.fail("unknown tier '" + name + "' (not in tiers.multipliers)");
      }
      long v = 0;
      try {
        v = std::stol(value.as_string());
      } catch (const std::exception&) {
        value.fail("expected a whole number from -32 to 32");
      }
      if (v < -32 || v > 32) value.fail("expected a whole number from -32 to 32");
      t.pow_bits[name] = static_cast<int>(v);
    }
  }
  if (auto ttl = n.get("tier_ttl")) {
    t.tier_ttl = ttl->as_duration();
    if (t.tier_ttl <= core::duration::zero() || t.tier_ttl > std::chrono::hours(24 * 30)) {
      ttl->fail("must be longer than 0 and at most 720h");
    }
  }
  return t;
}

/// One step of the ladder.
penalty_step_config read_penalty_step(const yaml_node& n) {
  using kind = penalty_step_config::kind;
  n.expect_keys({"at", "action", "factor", "for"});
  penalty_step_config s;
  s.line = n.line();
  s.at = as_u32(n.at("at"), 1, 1'000'000);
  const yaml_node action = n.at("action");
  const std::string a = action.as_string();
  if (a == "warn") {
    s.action = kind::warn;
  } else if (a == "throttle") {
    s.action = kind::throttle;
  } else if (a == "read_only") {
    s.action = kind::read_only;
  } else if (a == "pow") {
    s.action = kind::pow;
  } else if (a == "ban") {
    s.action = kind::ban;
  } else {
    action.fail("expected warn, throttle, read_only, pow or ban, got '" + a + "'");
  }
  if (auto f = n.get("factor")) {
    if (s.action != kind::throttle) f->fail("only a throttle step has a factor");
    s.factor = as_factor(*f, 0.01, 0.99, "a throttle factor is a number from 0.01 to 0.99");
  } else if (s.action == kind::throttle) {
    n.at("factor");  // names the missing key
  }
  if (auto d = n.get("for")) {
    if (s.action == kind::warn || s.action == kind::pow) {
      d->fail("a " + a + " step lasts while the score holds: leave out `for`");
    }
    s.hold = d->as_duration();
    if (s.hold <= core::duration::zero() || s.hold > std::chrono::hours(24 * 30)) {
      d->fail("must be longer than 0 and at most 720h");
    }
  }
  return s;
}

/// `penalties`: points per event, their decay, and the steps (docs/design.md §16).
penalties_config read_penalties(const yaml_node& n, loader& ld) {
  n.expect_keys({"points", "decay", "steps"});
  penalties_config p;
  p.file = n.file();
  p.line = n.key_line();
  for (const auto& [event, value] : n.at("points").entries()) {
    if (!valid_name(event)) value.fail("invalid event name (use a-z, 0-9, _ and -)");
    p.points.emplace_back(event, as_u32(value, 0, 1'000'000));
    // Every other event is a violation reason, checked once all are read (pow_failed and
    // token_invalid and protocol_abuse always are).
    if (event != "rate_limited" && event != "pow_failed" && event != "token_invalid" &&
        event != "protocol_abuse") {
      ld.references.push_back({value.file(), value.line(), value.path(), event});
    }
  }
  if (auto d = n.get("decay")) {
    // "N/<duration>": N points off per that long without new points.
    const std::string text = d->as_string();
    const auto slash = text.find('/');
    core::nanos period = 0;
    if (slash != std::string::npos)
      period = core::parse_duration(text.substr(slash + 1)).value_or(0);
    std::uint32_t count = 0;
    const std::string head = text.substr(0, slash);
    const bool digits =
        !head.empty() && head.size() <= 6 &&
        std::all_of(head.begin(), head.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (digits) count = static_cast<std::uint32_t>(std::stoul(head));
    if (period <= 0 || count == 0 || count > 100'000) {
      d->fail("expected points per duration such as 1/10m");
    }
    p.decay_points = count;
    p.decay = std::chrono::duration_cast<core::duration>(std::chrono::nanoseconds(period));
  }
  const yaml_node steps = n.at("steps");
  for (const yaml_node& i : steps.items())
    p.steps.push_back(read_penalty_step(i));
  if (p.steps.empty()) steps.fail("name at least one step");
  if (p.steps.size() > 16) steps.fail("at most 16 steps");
  for (std::size_t i = 1; i < p.steps.size(); ++i) {
    if (p.steps[i].at <= p.steps[i - 1].at) {
      steps.items()[i].at("at").fail("steps go up: each `at` above the one before");
    }
  }
  return p;
}

void read_file(const yaml_node& root, loader& ld) {
  if (root.is_null()) return;  // an empty policy file adds nothing
  if (ld.host) {
    // One set of violation counters and address levels serves every host (docs/design.md
    // §15, "Tenants (per Host)").
    for (const char* key : {"levels", "violations", "pow_counters", "penalties"}) {
      if (auto n = root.get(key)) {
        n->fail(std::string(key) +
                " are the gateway's, set in its top-level policies: a host's policy files "
                "define categories and tiers");
      }
    }
  }
  root.expect_keys({"levels", "categories", "violations", "pow_counters", "tiers", "penalties"});
  const std::string& file = root.file();
  if (auto n = root.get("penalties")) {
    if (!ld.penalties_file.empty()) n->fail("penalties already set in " + ld.penalties_file);
    ld.policy.penalties = read_penalties(*n, ld);
    ld.penalties_file = file;
  }
  if (auto n = root.get("tiers")) {
    if (!ld.tiers_file.empty()) n->fail("tiers already set in " + ld.tiers_file);
    ld.policy.tiers = read_tiers(*n);
    ld.tiers_file = file;
  }
  if (auto n = root.get("levels")) {
    if (!ld.levels_file.empty()) n->fail("levels already set in " + ld.levels_file);
    ld.policy.prefixes = read_levels(*n);
    ld.levels_file = file;
  }
  if (auto n = root.get("pow_counters")) {
    if (!ld.pow_counters_file.empty())
      n->fail("pow_counters already set in " + ld.pow_counters_file);
    ld.policy.pow_counters = read_pow_counters(*n);
    ld.pow_counters_file = file;
  }
  if (auto n = root.get("categories")) {
    for (const auto& [name, value] : n->entries()) {
      if (!valid_name(name)) value.fail("invalid category name (use a-z, 0-9, _ and -)");
      const auto [at, fresh] = ld.category_files.try_emplace(name, file);
      if (!fresh) value.fail("category already defined in " + at->second);
      ld.policy.categories.push_back(read_category(name, value, ld));
    }
  }
  if (auto n = root.get("violations")) {
    for (const auto& [name, value] : n->entries()) {
      if (!valid_name(name)) value.fail("invalid violation reason (use a-z, 0-9, _ and -)");
      const auto [at, fresh] = ld.violation_files.try_emplace(name, file);
      if (!fresh) value.fail("violation reason already defined in " + at->second);
      ld.policy.violations.push_back(read_violation(name, value));
    }
  }
}

policy_config finish(loader& ld) {
  for (const reason_reference& r : ld.references) {
    if (!ld.violation_files.contains(r.reason)) {
      throw error(r.file, r.line, r.path,
                  "unknown violation reason '" + r.reason + "' (define it under violations)");
    }
  }
  // A failed proof always raises pow_failed (docs/design.md §5); by default on the network level
  // only.
  if (!ld.violation_files.contains("pow_failed")) {
    ld.policy.violations.push_back({"pow_failed", false, true, std::nullopt});
  }
  // A refused token always raises token_invalid (docs/design.md §15); by default on the
  // individual level only: one client's bad tokens say nothing of its neighbours.
  if (!ld.violation_files.contains("token_invalid")) {
    ld.policy.violations.push_back({"token_invalid", true, false, std::nullopt});
  }
  // An HTTP/2 connection ended for abuse (rapid reset, floods, endless header blocks,
  // docs/design.md §17) always raises protocol_abuse; by default on the individual level only.
  if (!ld.violation_files.contains("protocol_abuse")) {
    ld.policy.violations.push_back({"protocol_abuse", true, false, std::nullopt});
  }
  return std::move(ld.policy);
}

}  // namespace

const category_config* policy_config::category(const std::string& name) const {
  for (const auto& c : categories) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

std::string cost_fault(const category_config& c, std::uint32_t cost) {
  for (const limit_config& l : c.limits) {
    if (l.quota && cost > l.quota->limit) {
      return "cost " + std::to_string(cost) + " exceeds limit " + std::to_string(l.quota->limit) +
             " of quota " + l.name + "; such requests could never pass";
    }
    for (int t = 0; t < 2; ++t) {
      const auto& tc = l.tiers[t];
      if (tc && cost > tc->burst) {
        return "cost " + std::to_string(cost) + " exceeds burst " + std::to_string(tc->burst) +
               " of " + l.name + "." + std::string(core::tier_name(static_cast<tier>(t))) +
               "; such requests could never pass";
      }
    }
  }
  return "";
}

const violation_config* policy_config::violation(const std::string& name) const {
  for (const auto& v : violations) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

std::vector<std::string> coverage_warnings(const policy_config& policy) {
  std::vector<std::string> out;
  std::size_t more = 0;
  for (const auto& c : policy.categories) {
    if (c.unlimited || c.shadow) continue;
    bool global = false, v4 = false, v6 = false;
    for (const auto& l : c.limits) {
      if (l.shadow || l.concurrency != 0) continue;  // requests in flight limit no rate
      global |= l.key == core::key_source::global;
      if (l.key == core::key_source::address && l.part != core::address_part::level) {
        v4 = v6 = true;  // key: individual or network: either family's address
      } else if (l.key == core::key_source::address) {
        (core::is_v4(l.address_level) ? v4 : v6) = true;
      }
    }
    if (global || (v4 && v6)) continue;
    if (out.size() == max_coverage_warnings) {
      ++more;  // counted on one last line, not each on a line of its own
      continue;
    }
    const std::string where = c.file + ":" + std::to_string(c.line) + ": categories." + c.name;
    if (!v4 && !v6) {
      out.push_back(where +
                    ": limits no request by its address and has no global limit (a keyed limit "
                    "binds only requests that carry its key): every other request is unlimited; "
                    "add a limit, or say unlimited: true if that is meant");
    } else {
      out.push_back(where +
                    (v4 ? ": limits IPv4 clients only (no ipv6_subnet or ipv6_provider "
                          "limit): IPv6 clients are unlimited"
                        : ": limits IPv6 clients only (no ipv4_individual or ipv4_network "
                          "limit): IPv4 clients are unlimited") +
                    "; add a limit for them, or say unlimited: true if that is meant");
    }
  }
  if (more > 0) {
    out.push_back("and " + std::to_string(more) + " more categories like these");
  }
  return out;
}

policy_config load_policies(const std::vector<std::string>& paths) {
  loader ld;
  for (const std::string& path : paths) {
    with_file_errors(path, [&] { read_file(load_yaml_file(path), ld); });
    ld.policy.files.push_back(path);
  }
  return finish(ld);
}

policy_config load_host_policies(const std::vector<std::string>& paths,
                                 const policy_config& gateway) {
  loader ld;
  ld.host = true;
  // Status violations name the gateway's reasons.
  for (const violation_config& v : gateway.violations)
    ld.violation_files.emplace(v.name, "");
  for (const std::string& path : paths) {
    with_file_errors(path, [&] { read_file(load_yaml_file(path), ld); });
    ld.policy.files.push_back(path);
  }
  policy_config p = finish(ld);
  p.prefixes = gateway.prefixes;
  p.violations = gateway.violations;
  p.pow_counters = gateway.pow_counters;
  p.penalties = gateway.penalties;  // one ladder: its throttled limits are compiled per host too
  return p;
}

policy_config load_policy_text(const std::string& text, const std::string& name) {
  loader ld;
  with_file_errors(name, [&] { read_file(load_yaml_text(text, name), ld); });
  ld.policy.files.push_back(name);
  return finish(ld);
}

}  // namespace tollgate::config
