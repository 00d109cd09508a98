#include "gateway/config/policy.hpp"

#include <algorithm>

#include "gateway/config/yaml_reader.hpp"

namespace tollgate::config {

namespace {

using core::level;
using core::tier;

constexpr std::uint32_t max_burst = 1'000'000;  // matches limit::max_burst

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
  std::vector<std::string> category_files;
  std::vector<std::string> violation_files;
};

bool valid_name(const std::string& s) {
  return !s.empty() && s.size() <= 64 && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

bool valid_header_name(const std::string& s) {
  return !s.empty() && s.size() <= 128 && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
  });
}

std::uint32_t as_u32(const yaml_node& n, std::uint32_t min, std::uint32_t max) {
  return static_cast<std::uint32_t>(n.as_uint(min, max));
}

tier_config read_tier(const yaml_node& n) {
  n.expect_keys({"rate", "burst"});
  return {n.at("rate").as_rate(), as_u32(n.at("burst"), 1, max_burst)};
}

limit_config read_limit(const yaml_node& n, level l) {
  if (l == level::identity) {
    n.expect_keys({"header", "short", "long"});
  } else {
    n.expect_keys({"short", "long"});
  }
  limit_config out;
  if (auto s = n.get("short")) out.tiers[0] = read_tier(*s);
  if (auto s = n.get("long")) out.tiers[1] = read_tier(*s);
  if (!out.tiers[0] && !out.tiers[1]) n.fail("a limit needs a short tier, a long tier or both");
  if (l == level::identity) {
    const yaml_node h = n.at("header");
    out.header = h.as_string();
    if (!valid_header_name(out.header)) h.fail("invalid header name '" + out.header + "'");
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
                 "max_connections_per_address"});
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
  return w;
}

category_config read_category(const std::string& name, const yaml_node& n, loader& ld) {
  n.expect_keys({"cost", "limits", "pow", "status_violations", "websocket"});
  category_config c;
  c.name = name;
  std::optional<yaml_node> cost_node = n.get("cost");
  if (cost_node) c.cost = as_u32(*cost_node, 1, max_burst);
  if (auto limits = n.get("limits")) {
    for (const auto& [level_text, value] : limits->entries()) {
      const auto l = core::level_from_name(level_text);
      if (!l) {
        value.fail(
            "unknown level (expected ipv4_individual, ipv4_network, ipv6_subnet, ipv6_provider, "
            "global or identity)");
      }
      c.limits[static_cast<std::size_t>(*l)] = read_limit(value, *l);
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
  // A request dearer than a burst could never pass: say so now rather than reject forever.
  for (std::size_t l = 0; l < core::level_count; ++l) {
    if (!c.limits[l]) continue;
    for (int t = 0; t < 2; ++t) {
      const auto& tc = c.limits[l]->tiers[t];
      if (tc && c.cost > tc->burst) {
        cost_node->fail("cost " + std::to_string(c.cost) + " exceeds burst " +
                        std::to_string(tc->burst) + " of " +
                        std::string(core::level_name(static_cast<level>(l))) + "." +
                        std::string(core::tier_name(static_cast<tier>(t))) +
                        "; such requests could never pass");
      }
    }
  }
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
    if (ban.duration <= 0) duration.fail("must be longer than 0");
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
  n.expect_keys({"max_counter", "decay_interval", "max_individual_entries", "max_network_entries"});
  pow_counters_config p;
  if (auto v = n.get("max_counter")) p.max_counter = as_u32(*v, 1, 1000);
  if (auto v = n.get("decay_interval")) {
    p.decay_interval = v->as_duration();
    if (p.decay_interval <= 0) v->fail("must be longer than 0");
  }
  if (auto v = n.get("max_individual_entries")) {
    p.max_individual_entries = as_u32(*v, 1, 100'000'000);
  }
  if (auto v = n.get("max_network_entries")) p.max_network_entries = as_u32(*v, 1, 100'000'000);
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

void read_file(const yaml_node& root, loader& ld) {
  if (root.is_null()) return;  // an empty policy file adds nothing
  root.expect_keys({"levels", "categories", "violations", "pow_counters"});
  const std::string& file = root.file();
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
      for (std::size_t i = 0; i < ld.policy.categories.size(); ++i) {
        if (ld.policy.categories[i].name == name) {
          value.fail("category already defined in " + ld.category_files[i]);
        }
      }
      ld.policy.categories.push_back(read_category(name, value, ld));
      ld.category_files.push_back(file);
    }
  }
  if (auto n = root.get("violations")) {
    for (const auto& [name, value] : n->entries()) {
      if (!valid_name(name)) value.fail("invalid violation reason (use a-z, 0-9, _ and -)");
      for (std::size_t i = 0; i < ld.policy.violations.size(); ++i) {
        if (ld.policy.violations[i].name == name) {
          value.fail("violation reason already defined in " + ld.violation_files[i]);
        }
      }
      ld.policy.violations.push_back(read_violation(name, value));
      ld.violation_files.push_back(file);
    }
  }
}

policy_config finish(loader& ld) {
  for (const reason_reference& r : ld.references) {
    if (ld.policy.violation(r.reason) == nullptr) {
      throw error(r.file, r.line, r.path,
                  "unknown violation reason '" + r.reason + "' (define it under violations)");
    }
  }
  // A failed proof always raises pow_failed (DESIGN §5); by default on the network level only.
  if (ld.policy.violation("pow_failed") == nullptr) {
    ld.policy.violations.push_back({"pow_failed", false, true, std::nullopt});
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

const violation_config* policy_config::violation(const std::string& name) const {
  for (const auto& v : violations) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

policy_config load_policies(const std::vector<std::string>& paths) {
  loader ld;
  for (const std::string& path : paths) {
    with_file_errors(path, [&] { read_file(load_yaml_file(path), ld); });
    ld.policy.files.push_back(path);
  }
  return finish(ld);
}

policy_config load_policy_text(const std::string& text, const std::string& name) {
  loader ld;
  with_file_errors(name, [&] { read_file(load_yaml_text(text, name), ld); });
  ld.policy.files.push_back(name);
  return finish(ld);
}

}  // namespace tollgate::config
