#include "gateway/policy/compiled_policy.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <map>

#include "gateway/config/error.hpp"
#include "gateway/core/text.hpp"
#include "gateway/limit/headers.hpp"
#include "gateway/policy/keys.hpp"
#include "gateway/pow/crypto.hpp"

namespace tollgate::policy {

namespace {

using limit::key_source;
using limit::level;

/// Stable name of a limit's state: changing a prefix or a key starts it afresh, changing only
/// rates or bursts keeps it (the stored tat stays meaningful). Address levels keep the names
/// of earlier versions ("auth/ipv4_network/24"). A quota's name ends in its period
/// ("api/daily/header:x-api-key/quota:day"): a count and its window are not a tat, so turning
/// a rate limit into a quota, or changing the period, starts afresh too; changing the quota's
/// limit keeps the count.
std::string state_name(std::string_view prefix, const std::string& category,
                       const limit::limit_spec& s, const limit::level_prefixes& p) {
  std::string name = std::string(prefix) + category + "/" + s.name + "/";
  if (s.source == key_source::address && s.part == limit::address_part::level) {
    name += std::to_string(limit::prefix_of(s.address_level, p));
  } else if (s.source == key_source::address) {
    // key: individual or network: both families' prefixes of that level.
    const bool fine = s.part == limit::address_part::individual;
    name += fine ? "individual:" : "network:";
    name += std::to_string(limit::prefix_of(s.level_for(false), p)) + "," +
            std::to_string(limit::prefix_of(s.level_for(true), p));
  } else if (s.source == key_source::composite) {
    // "api/per_key_address/composite:header:x-api-key+individual"
    name += "composite:";
    for (std::size_t i = 0; i < s.parts.size(); ++i) {
      if (i > 0) name += '+';
      name += limit::source_name(s.parts[i].source);
      if (!s.parts[i].name.empty()) name += ":" + s.parts[i].name;
    }
  } else {
    name += limit::source_name(s.source);
    if (!s.key_name.empty()) name += ":" + s.key_name;
  }
  if (s.is_quota()) name += "/quota:" + std::string(core::period_name(s.quota.period));
  return name;
}

limit::limit_spec compile_limit(const config::category_config& cc, const config::limit_config& lc,
                                std::size_t slot, const limit::level_prefixes& prefixes,
                                std::string_view state_prefix) {
  limit::limit_spec s;
  s.name = lc.name;
  s.source = lc.key;
  s.address_level = lc.address_level;
  s.key_name = lc.key_name;
  if (s.source == key_source::composite) {
    for (const config::key_part_config& p : lc.parts)
      s.parts.push_back({p.source, p.name, -1});
  } else if (s.source != key_source::address && s.source != key_source::global) {
    s.parts.push_back({s.source, s.key_name, -1});
  }
  // Header names compare without case, so their state name is spelled one way.
  if (s.source == key_source::header) {
    std::transform(s.key_name.begin(), s.key_name.end(), s.key_name.begin(), core::ascii_lower);
  }
  for (limit::key_part& p : s.parts) {
    if (p.source == key_source::header) {
      std::transform(p.name.begin(), p.name.end(), p.name.begin(), core::ascii_lower);
    }
  }
  s.part = lc.part;
  for (int t = 0; t < 2; ++t) {
    if (lc.tiers[t]) s.tiers[t] = limit::make_params(lc.tiers[t]->rate, lc.tiers[t]->burst);
  }
  s.concurrency = lc.concurrency;
  if (lc.quota) s.quota = {lc.quota->limit, lc.quota->period, lc.quota->tiered};
  s.shadow = lc.shadow || cc.shadow;
  if (lc.on_excess) {
    s.delay = lc.on_excess->delay.count();
    s.max_delayed = lc.on_excess->max_delayed;
  }
  s.slot = static_cast<std::uint8_t>(slot);
  s.state_name = state_name(state_prefix, cc.name, s, prefixes);
  s.scope = limit::scope_of(s.state_name);
  return s;
}

/// Every limit a request of family `f` (0: IPv4, 1: IPv6) in `c` carries when it has every key,
/// of `specs` (c.limits, or a tier's).
std::vector<const limit::limit_spec*> family_limits(const category_limits& c, int f,
                                                    const std::vector<limit::limit_spec>& specs) {
  std::vector<const limit::limit_spec*> limits;
  for (level l : {f == 0 ? level::ipv4_individual : level::ipv6_subnet,
                  f == 0 ? level::ipv4_network : level::ipv6_provider}) {
    const int i = c.by_level[static_cast<std::size_t>(l)];
    if (i >= 0) limits.push_back(&specs[static_cast<std::size_t>(i)]);
  }
  for (std::uint8_t i : c.keyed) {
    if (specs[i].concurrency == 0) limits.push_back(&specs[i]);  // not a rate: not in the field
  }
  return limits;
}

/// `p` scaled by a tier's multiplier `m` (docs/design.md §15): the rate and the burst, the
/// burst rounded up and at least 1.
limit::gcra_params scaled(const limit::gcra_params& p, double m) {
  if (p.burst == 0) return p;
  const core::nanos t = std::max<core::nanos>(1, std::llround(static_cast<double>(p.emission) / m));
  const auto b =
      static_cast<std::uint32_t>(std::max(1.0, std::ceil(static_cast<double>(p.burst) * m - 1e-9)));
  return {t, t * static_cast<core::nanos>(b - 1), b};
}

/// The limits of category `c` for a tier of multiplier `m`: global limits as they are, quotas
/// only when `tiered`.
std::vector<limit::limit_spec> scaled_limits(const category_limits& c, double m) {
  std::vector<limit::limit_spec> out = c.limits;
  for (limit::limit_spec& s : out)
    scale_limit(s, m);
  return out;
}

}  // namespace

std::shared_ptr<const scaled_set> scaled_cache::get(const category_limits& c, std::uint8_t tier,
                                                    float factor) {
  for (const auto& s : sets_) {
    if (s->category == c.index && s->tier == tier && s->factor == factor) return s;
  }
  if (sets_.size() >= max_sets) sets_.clear();
  auto s = std::make_shared<scaled_set>();
  s->category = c.index;
  s->tier = tier;
  s->factor = factor;
  s->limits = c.limits_of(tier);
  for (limit::limit_spec& l : s->limits)
    scale_limit(l, factor);
  for (int f = 0; f < 2; ++f) {
    const auto limits = family_limits(c, f, s->limits);
    s->policy_field[f] = limit::policy_field(limits, 0);
    s->family_limits[f] = static_cast<std::uint8_t>(limits.size());
  }
  sets_.push_back(s);
  return s;
}

void scale_limit(limit::limit_spec& s, double m) {
  if (s.source == key_source::global) return;
  if (s.concurrency != 0) {
    s.concurrency = static_cast<std::uint32_t>(
        std::max(1.0, std::ceil(static_cast<double>(s.concurrency) * m - 1e-9)));
    return;
  }
  if (s.is_quota()) {
    if (s.quota.tiered) {
      s.quota.limit = static_cast<std::uint32_t>(std::min(
          4294967295.0, std::max(1.0, std::ceil(static_cast<double>(s.quota.limit) * m - 1e-9))));
    }
    return;
  }
  for (auto& t : s.tiers)
    t = scaled(t, m);
}

namespace {

/// The penalty ladder of `p`, compiled; reasons index into `v`.
pow::penalty_rules compile_penalties(const config::penalties_config& p, const violation_rules& v) {
  pow::penalty_rules out;
  out.points.assign(v.names.size(), 0);
  for (const auto& [event, points] : p.points) {
    if (event == "rate_limited") {
      out.rate_limited = points;
    } else if (const auto i = v.find(event)) {
      out.points[*i] = points;
    }
  }
  out.decay_interval = std::chrono::duration_cast<std::chrono::nanoseconds>(p.decay).count();
  out.decay_points = p.decay_points;
  using kind = config::penalty_step_config::kind;
  for (const config::penalty_step_config& c : p.steps) {
    pow::penalty_step s;
    s.at = c.at;
    s.factor = c.factor;
    s.hold = std::chrono::duration_cast<std::chrono::nanoseconds>(c.hold).count();
    switch (c.action) {
      case kind::warn:
        s.action = pow::penalty_action::warn;
        break;
      case kind::throttle: {
        s.action = pow::penalty_action::throttle;
        const auto f = std::find(out.factors.begin(), out.factors.end(), c.factor);
        s.variant = static_cast<std::uint8_t>(f - out.factors.begin());
        if (f == out.factors.end()) out.factors.push_back(c.factor);
        break;
      }
      case kind::read_only:
        s.action = pow::penalty_action::read_only;
        break;
      case kind::pow:
        s.action = pow::penalty_action::pow;
        break;
      case kind::ban:
        s.action = pow::penalty_action::ban;
        break;
    }
    out.steps.push_back(s);
  }
  return out;
}

/// The consumer tiers of `p`, compiled; claim paths through `claim`.
template <class ClaimIndex>
tier_rules compile_tiers(const config::tiers_config& t, ClaimIndex&& claim) {
  tier_rules out;
  for (const auto& [name, m] : t.multipliers) {
    out.names.push_back(name);
    out.multipliers.push_back(m);
    const auto bits = t.pow_bits.find(name);
    out.pow_bits.push_back(bits == t.pow_bits.end() ? 0 : bits->second);
  }
  out.fallback = out.find(t.default_tier);
  out.ttl = std::chrono::duration_cast<std::chrono::nanoseconds>(t.tier_ttl).count();
  for (const config::tier_source_config& c : t.from) {
    tier_rules::source src;
    src.kind = c.source;
    switch (c.source) {
      case config::tier_source_config::kind::jwt_claim:
        src.key = {key_source::claim, c.claim, static_cast<std::int16_t>(claim(c.claim))};
        break;
      case config::tier_source_config::kind::key_file: {
        src.key = {c.key.source, c.key.name, -1};
        if (src.key.source == key_source::header) {
          std::transform(src.key.name.begin(), src.key.name.end(), src.key.name.begin(),
                         core::ascii_lower);
        }
        if (src.key.source == key_source::claim) {
          src.key.claim = static_cast<std::int16_t>(claim(c.key.name));
        }
        // Keyed on a client certificate's fingerprint, `sha256:<hex>` names the certificate
        // whose SHA-256 that is (docs/design.md §17): the value itself, not its hash.
        const bool fingerprint =
            src.key.source == key_source::client_cert && src.key.name == "sha256";
        for (const auto& [key, tier] : c.keys) {
          if (fingerprint && key.starts_with("sha256:")) {
            src.exact.emplace(key.substr(7), out.find(tier));
          } else if (key.starts_with("sha256:")) {
            src.hashed.emplace(key.substr(7), out.find(tier));
          } else {
            src.exact.emplace(key, out.find(tier));
          }
        }
        src.reject_unknown = c.reject_unknown;
        break;
      }
      case config::tier_source_config::kind::network:
        src.networks = c.networks;
        src.tier = out.find(c.tier);
        break;
      case config::tier_source_config::kind::upstream:
        out.upstream = true;
        break;
      case config::tier_source_config::kind::overrides:
        break;
    }
    out.from.push_back(std::move(src));
  }
  // The admin API's overrides come first when `from` does not place them.
  if (std::none_of(out.from.begin(), out.from.end(), [](const tier_rules::source& s) {
        return s.kind == config::tier_source_config::kind::overrides;
      })) {
    tier_rules::source first;
    first.kind = config::tier_source_config::kind::overrides;
    out.from.insert(out.from.begin(), std::move(first));
  }
  return out;
}

/// Lower-case hex of SHA-256 of `value`: how a key file names a key it does not spell out.
std::string sha256_hex(std::string_view value) {
  const pow::digest d = pow::sha256(value);
  std::string out(64, '0');
  constexpr char hex[] = "0123456789abcdef";
  for (std::size_t i = 0; i < d.size(); ++i) {
    out[2 * i] = hex[d[i] >> 4];
    out[2 * i + 1] = hex[d[i] & 15];
  }
  return out;
}

}  // namespace

std::string_view value_of(const limit::key_part& p, const key_sources& keys, std::string& query) {
  switch (p.source) {
    case key_source::header:
      return keys.header(keys.context, p.name);
    case key_source::query:
      return query_value(keys.target, p.name, query) ? std::string_view(query) : std::string_view();
    case key_source::cookie:
      return cookie_value(keys.header(keys.context, "cookie"), p.name);
    case key_source::bearer:
      return core::bearer_token(keys.header(keys.context, "authorization"));
    case key_source::claim:
      return keys.claims != nullptr && p.claim >= 0 &&
                     static_cast<std::size_t>(p.claim) < keys.claims->size()
                 ? std::string_view((*keys.claims)[static_cast<std::size_t>(p.claim)])
                 : std::string_view();
    case key_source::client_cert: {
      if (keys.certificate == nullptr) return {};
      const auto f = core::certificate_field_from_name(p.name);
      return f ? keys.certificate->field(*f) : std::string_view();
    }
    default:
      break;
  }
  return {};
}

namespace {

/// The stored key of an address level's key `key` of level `l`, as a keyed limit's key.
std::uint64_t address_part(std::uint64_t key, level l, const core::siphash_key& secret) {
  char bytes[9];
  std::memcpy(bytes, &key, 8);
  bytes[8] = static_cast<char>(l);
  return core::siphash13(std::string_view(bytes, 9), secret);
}

}  // namespace

compiled_policy::compiled_policy(const config::policy_config& policy, core::siphash_key key_secret,
                                 const compile_options& options)
    : claim_paths_(options.claim_paths),
      violations_(compile_violations(policy)),
      key_secret_(key_secret) {
  prefixes_ = policy.prefixes;
  categories_.reserve(policy.categories.size());
  std::map<std::uint32_t, std::string> scopes;
  for (const config::category_config& cc : policy.categories) {
    category_limits c;
    c.name = cc.name;
    c.index = static_cast<std::uint16_t>(options.first_index + categories_.size());
    c.cost = cc.cost;
    c.shadow = cc.shadow;
    for (std::size_t i = 0; i < cc.limits.size(); ++i) {
      const config::limit_config& lc = cc.limits[i];
      limit::limit_spec s = compile_limit(cc, lc, i, prefixes_, options.state_prefix);
      for (limit::key_part& p : s.parts) {
        if (p.source == key_source::claim) p.claim = static_cast<std::int16_t>(claim_index(p.name));
      }
      const auto [at, fresh] = scopes.emplace(s.scope, s.state_name);
      if (!fresh) {
        throw config::error(
            cc.file, lc.line, "categories." + cc.name + ".limits." + lc.name,
            "the state of this limit would share a hash with '" + at->second + "'; rename it");
      }
      c.policy_varies |= s.is_quota() && s.quota.period == core::period::month && !s.shadow;
      if (s.source == key_source::address && s.part == limit::address_part::level) {
        c.by_level[static_cast<std::size_t>(s.address_level)] = static_cast<std::int8_t>(i);
      } else {
        c.keyed.push_back(static_cast<std::uint8_t>(i));
      }
      c.limits.push_back(std::move(s));
    }
    for (int f = 0; f < 2; ++f) {
      const auto limits = family_limits(c, f, c.limits);
      // Instant 0: with no monthly quota (policy_varies), no item depends on the date.
      c.policy_field[f] = limit::policy_field(limits, 0);
      c.family_limits[f] = static_cast<std::uint8_t>(limits.size());
    }
    if (policy.tiers) {
      for (const auto& [name, m] : policy.tiers->multipliers) {
        c.tiered.push_back(scaled_limits(c, m));
        auto& fields = c.tiered_policy_field.emplace_back();
        for (int f = 0; f < 2; ++f)
          fields[f] = limit::policy_field(family_limits(c, f, c.tiered.back()), 0);
      }
    }
    if (policy.penalties) {
      // The ladder's throttle steps scale the client's limits over its tier's (docs/design.md
      // §16): one set per factor and tier, compiled now rather than per request.
      std::vector<double> factors;  // in the order compile_penalties numbers them
      for (const auto& step : policy.penalties->steps) {
        if (step.action == config::penalty_step_config::kind::throttle &&
            std::find(factors.begin(), factors.end(), step.factor) == factors.end()) {
          factors.push_back(step.factor);
        }
      }
      for (const double f : factors) {
        if (!policy.tiers) {
          c.throttled.push_back(scaled_limits(c, f));
        } else {
          for (const auto& [name, m] : policy.tiers->multipliers)
            c.throttled.push_back(scaled_limits(c, m * f));
        }
      }
    }
    c.pow = compile_pow(cc, violations_);
    if (cc.websocket) c.websocket = *cc.websocket;
    c.messages = protocol::ws::compile_limits(c.websocket);
    if (cc.cors) c.cors.emplace(*cc.cors);
    if (cc.attack_mode) c.attack = attack_rules::compile(*cc.attack_mode);
    by_name_.emplace(c.name, categories_.size());
    categories_.push_back(std::move(c));
  }
  if (policy.penalties) penalties_ = compile_penalties(*policy.penalties, violations_);
  if (policy.tiers) {
    tiers_ = compile_tiers(*policy.tiers, [this](const std::string& p) { return claim_index(p); });
  }
  // A clearance is bound to this policy's categories (docs/design.md §16): its state prefix
  // (a host entry's) and their names.
  std::string names = options.state_prefix;
  for (const category_limits& c : categories_)
    names += c.name + ",";
  const std::uint32_t scope = pow::category_tag(names);
  for (category_limits& c : categories_)
    c.pow.scope = scope;
}

std::uint8_t compiled_policy::tier_of(const core::address& client, const key_sources& keys,
                                      bool& unknown_key, const tier_memory* memory,
                                      const pow::subject& who, core::nanos now,
                                      std::uint8_t given) const {
  unknown_key = false;
  std::string query;
  for (const tier_rules::source& src : tiers_->from) {
    switch (src.kind) {
      case config::tier_source_config::kind::jwt_claim: {
        // The claim names a tier; a value that names none leaves it to the next source.
        const std::uint8_t t = tiers_->find(value_of(src.key, keys, query));
        if (t != no_tier) return t;
        break;
      }
      case config::tier_source_config::kind::key_file: {
        const std::string_view value = value_of(src.key, keys, query);
        if (value.empty()) break;
        if (const auto it = src.exact.find(value); it != src.exact.end()) return it->second;
        if (!src.hashed.empty()) {
          if (const auto it = src.hashed.find(sha256_hex(value)); it != src.hashed.end()) {
            return it->second;
          }
        }
        if (src.reject_unknown) {
          unknown_key = true;
          return tiers_->fallback;
        }
        break;
      }
      case config::tier_source_config::kind::network:
        if (core::in_any(src.networks, client)) return src.tier;
        break;
      case config::tier_source_config::kind::overrides:
        if (given != no_tier) return given;
        break;
      case config::tier_source_config::kind::upstream: {
        if (memory == nullptr) break;
        const std::uint8_t t = tiers_->find(memory->find(who, now, query));
        if (t != no_tier) return t;
        break;
      }
    }
  }
  return tiers_->fallback;
}

const category_limits* compiled_policy::find(std::string_view name) const noexcept {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &categories_[it->second];
}

limit::limit_request compiled_policy::request(const category_limits& c,
                                              const limit::address& client, const key_sources& keys,
                                              std::uint32_t cost, core::nanos now,
                                              std::uint32_t& unkeyed, std::uint8_t tier) const {
  const std::vector<limit::limit_spec>& specs = c.limits_of(tier);
  limit::limit_request r;
  r.consumer_tier = tier;
  r.cost = cost;
  r.now = now;
  unkeyed = 0;
  const limit::address_keys k = limit::keys_of(client, prefixes_);
  r.network = k.coarse_key;
  r.network_bits = limit::prefix_of(k.coarse, prefixes_);
  r.v6 = k.coarse == level::ipv6_provider;
  for (const auto& [l, key] : {std::pair{k.fine, k.fine_key}, {k.coarse, k.coarse_key}}) {
    const int i = c.by_level[static_cast<std::size_t>(l)];
    if (i >= 0) r.groups[r.group_count++] = {&specs[static_cast<std::size_t>(i)], key};
  }
  std::string query;  // a decoded query value (short ones stay in the string's own buffer)
  for (const std::uint8_t i : c.keyed) {
    const limit::limit_spec& s = specs[i];
    std::uint64_t key = 0;
    if (s.source == key_source::global) {
      r.groups[r.group_count++] = {&s, 0};
      continue;
    }
    if (s.source == key_source::address) {  // key: individual or network
      const std::uint64_t a = s.part == limit::address_part::network ? k.coarse_key : k.fine_key;
      if (s.concurrency != 0) {
        r.inflight[r.inflight_count++] = {&s, a};
      } else {
        r.groups[r.group_count++] = {&s, a};
      }
      continue;
    }
    if (s.source != key_source::composite) {
      const std::string_view value = value_of(s.parts[0], keys, query);
      if (value.empty()) {
        unkeyed |= 1u << i;
        continue;
      }
      key = key_of(value);
    } else if (!composite_key(s, k, keys, query, key)) {
      unkeyed |= 1u << i;
      continue;
    }
    if (s.concurrency != 0) {
      r.inflight[r.inflight_count++] = {&s, key};
    } else {
      r.groups[r.group_count++] = {&s, key};
    }
  }
  return r;
}

int compiled_policy::claim_index(std::string_view path) {
  for (std::size_t i = 0; i < claim_paths_.size(); ++i) {
    if (claim_paths_[i] == path) return static_cast<int>(i);
  }
  claim_paths_.emplace_back(path);
  return static_cast<int>(claim_paths_.size() - 1);
}

bool compiled_policy::composite_key(const limit::limit_spec& s, const limit::address_keys& k,
                                    const key_sources& keys, std::string& query,
                                    std::uint64_t& key) const {
  // The parts' stored keys, hashed together: one bucket per combination.
  std::array<std::uint64_t, 4> parts{};
  const std::size_t n = std::min(s.parts.size(), parts.size());
  for (std::size_t p = 0; p < n; ++p) {
    const limit::key_part& part = s.parts[p];
    if (part.source == key_source::individual) {
      parts[p] = address_part(k.fine_key, k.fine, key_secret_);
    } else if (part.source == key_source::network) {
      parts[p] = address_part(k.coarse_key, k.coarse, key_secret_);
    } else {
      const std::string_view value = value_of(part, keys, query);
      if (value.empty()) return false;
      parts[p] = key_of(value);
    }
  }
  key = core::siphash13(
      std::string_view(reinterpret_cast<const char*>(parts.data()), n * sizeof(std::uint64_t)),
      key_secret_);
  return true;
}

}  // namespace tollgate::policy
