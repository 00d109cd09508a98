#pragma once
/// Policy limits compiled for the request path: per category, every limit as a
/// limit::limit_spec (GCRA constants, key source, stable state name) and the RateLimit-Policy
/// field of each address family.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gateway/config/policy.hpp"
#include "gateway/core/client_certificate.hpp"
#include "gateway/core/siphash.hpp"
#include "gateway/limit/address.hpp"
#include "gateway/limit/request.hpp"
#include "gateway/policy/attack.hpp"
#include "gateway/policy/cors.hpp"
#include "gateway/policy/pow_gate.hpp"
#include "gateway/policy/tier_memory.hpp"
#include "gateway/protocol/websocket_frames.hpp"

namespace tollgate::policy {

/// One category's limits, immutable once compiled.
struct category_limits {
  std::string name;  ///< category name
  /// Its place among every category of the configuration: the top level's first, then each
  /// host entry's (docs/design.md §15, "Tenants (per Host)"); indexes per-category tables.
  std::uint16_t index = 0;
  std::uint32_t cost = 1;                 ///< per request (a route may set its own)
  std::vector<limit::limit_spec> limits;  ///< in configuration order; slot = index
  std::array<std::int8_t, limit::level_count> by_level{-1, -1, -1, -1};  ///< address limits
  std::vector<std::uint8_t> keyed;              ///< indices of the other limits, in order
  std::array<std::string, 2> policy_field;      ///< RateLimit-Policy for IPv4 [0] and IPv6 [1]
  std::array<std::uint8_t, 2> family_limits{};  ///< limits policy_field lists, per family
  /// A monthly quota is among the limits: RateLimit-Policy's `w` is the current month's length,
  /// so the field is written per request rather than taken from policy_field.
  bool policy_varies = false;
  category_pow pow;     ///< proof of work, status violations
  bool shadow = false;  ///< mode: shadow (every limit shadowed)
  /// WebSocket options (docs/design.md §6): the category's, or the defaults when it sets none,
  /// since an operator may route an upgrade to any category.
  config::websocket_config websocket;
  protocol::ws::message_limits messages;  ///< `websocket`'s message limits, compiled
  std::optional<cors_rules> cors;         ///< CORS, when the gateway owns it for the category
  std::optional<attack_rules> attack;     ///< attack mode (docs/design.md §16), when set

  /// Per consumer tier (tier_rules order), `limits` scaled by its multiplier (docs/design.md
  /// §15): the same slots and state names, other rates and bursts. Empty without tiers.
  std::vector<std::vector<limit::limit_spec>> tiered;
  /// Per consumer tier, its policy_field.
  std::vector<std::array<std::string, 2>> tiered_policy_field;

  /// Per throttle factor of the penalty ladder (docs/design.md §16) and consumer tier (none:
  /// one), `limits` scaled by both: index variant * max(1, tiers) + tier.
  std::vector<std::vector<limit::limit_spec>> throttled;

  /// The limits of a client throttled by the ladder's factor `variant` with consumer tier
  /// `tier` (no_tier: none).
  const std::vector<limit::limit_spec>& throttled_of(std::uint8_t variant,
                                                     std::uint8_t tier) const noexcept {
    const std::size_t per = std::max<std::size_t>(1, tiered.size());
    return throttled[variant * per + (tier < tiered.size() ? tier : 0)];
  }
  /// The limits of consumer tier `tier` (no_tier: the configured ones).
  const std::vector<limit::limit_spec>& limits_of(std::uint8_t tier) const noexcept {
    return tier < tiered.size() ? tiered[tier] : limits;
  }
  /// The address limit of level `l`, or nullptr.
  const limit::limit_spec* at_level(limit::level l) const noexcept {
    const int i = by_level[static_cast<std::size_t>(l)];
    return i < 0 ? nullptr : &limits[static_cast<std::size_t>(i)];
  }
};

/// Scales limit `s` by `m` as a tier's multiplier does (docs/design.md §15): rate and burst (the
/// burst rounded up, at least 1), a concurrency; a global limit and an untiered quota stay.
void scale_limit(limit::limit_spec& s, double m);

/// A category's limits for one consumer tier scaled by one factor of attack mode (docs/design.md
/// §16), with their RateLimit-Policy fields: made once per worker and factor, not per request.
struct scaled_set {
  std::uint16_t category = 0;                   ///< category_limits::index
  std::uint8_t tier = 0xff;                     ///< the consumer tier (no_tier: none)
  float factor = 1;                             ///< the factor
  std::vector<limit::limit_spec> limits;        ///< by slot
  std::array<std::string, 2> policy_field;      ///< RateLimit-Policy for IPv4 [0] and IPv6 [1]
  std::array<std::uint8_t, 2> family_limits{};  ///< limits policy_field lists, per family
};

/// One worker's scaled sets, for one configuration snapshot (the caller clears it when the
/// snapshot changes). A request holds the set its limits point at.
/// Thread safety: one thread.
class scaled_cache {
 public:
  /// Most sets kept; past it the cache starts again (requests hold theirs).
  static constexpr std::size_t max_sets = 64;
  /// The limits of `c` for `tier` times `factor`.
  std::shared_ptr<const scaled_set> get(const category_limits& c, std::uint8_t tier, float factor);
  void clear() noexcept { sets_.clear(); }

 private:
  std::vector<std::shared_ptr<const scaled_set>> sets_;
};

/// No consumer tier: a policy without tiers.
inline constexpr std::uint8_t no_tier = 0xff;

/// Consumer tiers (docs/design.md §15, "Tiers"), compiled.
struct tier_rules {
  std::vector<std::string> names;   ///< by index
  std::vector<double> multipliers;  ///< by index
  std::vector<int> pow_bits;        ///< added to a required difficulty, by index
  std::uint8_t fallback = 0;        ///< the default tier
  /// One source of `tiers.from`.
  struct source {
    config::tier_source_config::kind kind{};
    limit::key_part key;  ///< what it reads (jwt_claim: the claim; key_file: the key)
    std::unordered_map<std::string, std::uint8_t, core::name_hash, std::equal_to<>> exact;
    std::unordered_map<std::string, std::uint8_t, core::name_hash, std::equal_to<>> hashed;
    bool reject_unknown = false;
    std::vector<core::cidr> networks;  ///< network
    std::uint8_t tier = 0;             ///< network: its tier
  };
  std::vector<source> from;  ///< tried in order
  bool upstream = false;     ///< one of them is `upstream`
  core::nanos ttl = 0;       ///< how long an upstream's tier holds (tier_ttl)
  /// The index of tier `name`, or no_tier.
  std::uint8_t find(std::string_view name) const noexcept {
    for (std::size_t i = 0; i < names.size(); ++i)
      if (names[i] == name) return static_cast<std::uint8_t>(i);
    return no_tier;
  }
};

/// Where the values of a request's keys come from. No HTTP library types: the caller passes a
/// header lookup.
struct key_sources {
  /// The value of header `name` (case-insensitive), or "" when absent.
  std::string_view (*header)(const void* context, std::string_view name) = nullptr;
  const void* context = nullptr;  ///< passed to `header`
  std::string_view target;        ///< the request target, for query parameters
  /// The values of the verified token's claims (compiled_policy::claim_paths order), or null
  /// for a request without a verified identity.
  const std::vector<std::string>* claims = nullptr;
  /// The client's verified TLS certificate (docs/design.md §17), or null for a request without
  /// one.
  const core::client_certificate* certificate = nullptr;
};

/// The value of key part `p` of a request with `keys` ("" when it lacks it); a query
/// parameter is decoded into `query`.
std::string_view value_of(const limit::key_part& p, const key_sources& keys, std::string& query);

/// How a policy is compiled beside others of the same configuration (a `hosts` entry's,
/// docs/design.md §15, "Tenants (per Host)").
struct compile_options {
  /// Put before every state name ("api.example.com@"): the top level's is "", so its state
  /// keeps its names; a host entry's is its first name and '@', which no category name holds.
  std::string state_prefix;
  /// The claim paths of the policies compiled before it: its own are added after them, so
  /// that one token's claims, read in the last policy's claim_paths order, serve them all.
  std::vector<std::string> claim_paths{"sub"};
  std::uint16_t first_index = 0;  ///< category_limits::index of its first category
};

/// Every category of a policy, compiled.
/// Thread safety: immutable after construction; shared by all workers through a snapshot.
class compiled_policy {
 public:
  /// Compiles `policy`, hashing key values under `key_secret`. Throws config::error when two
  /// limits' state names collide (in practice never: a 32-bit hash of a few dozen names).
  compiled_policy(const config::policy_config& policy, core::siphash_key key_secret,
                  const compile_options& options = {});

  /// The category called `name`, or nullptr.
  const category_limits* find(std::string_view name) const noexcept;
  /// All categories in policy order.
  const std::vector<category_limits>& categories() const noexcept { return categories_; }
  /// The violation reasons.
  const violation_rules& violations() const noexcept { return violations_; }
  /// The configured address level prefixes.
  const limit::level_prefixes& prefixes() const noexcept { return prefixes_; }

  /// The limit set of one request of category `c` from `client` at `now`, charged `cost`, for
  /// consumer tier `tier` (no_tier: the configured numbers). Key values come from `keys`; a
  /// limit whose key the request lacks is left out, and its slot's bit set in `unkeyed`.
  limit::limit_request request(const category_limits& c, const limit::address& client,
                               const key_sources& keys, std::uint32_t cost, core::nanos now,
                               std::uint32_t& unkeyed, std::uint8_t tier = no_tier) const;

  /// The penalty ladder (docs/design.md §16), or null when there is none.
  const pow::penalty_rules* penalties() const noexcept {
    return penalties_ ? &*penalties_ : nullptr;
  }
  /// The consumer tiers, or null when the policy has none.
  const tier_rules* tiers() const noexcept { return tiers_ ? &*tiers_ : nullptr; }
  /// The consumer tier of a request from `client` with `keys`: the first source of
  /// tiers.from that names one, else the default. `unknown_key` when a key file that rejects
  /// unknown keys did not know the request's key (docs/design.md §15: 401 unknown_key).
  /// `memory` holds the tiers upstreams set (the `upstream` source), for client `who` at
  /// `now`; null: that source names none. `given` is the tier the admin API's overrides give
  /// the request (the `override` source), or no_tier.
  std::uint8_t tier_of(const core::address& client, const key_sources& keys, bool& unknown_key,
                       const tier_memory* memory = nullptr, const pow::subject& who = {},
                       core::nanos now = 0, std::uint8_t given = no_tier) const;

  /// The claim paths its limits key on (docs/design.md §15), "sub" first: what the token
  /// verifier reads from every token, in this order.
  const std::vector<std::string>& claim_paths() const noexcept { return claim_paths_; }

  /// The stored key of `value` for a limit keyed on a header, query, cookie or bearer token.
  std::uint64_t key_of(std::string_view value) const noexcept {
    return core::siphash13(value, key_secret_);
  }

 private:
  /// The index of claim path `path` in claim_paths_, added if new.
  int claim_index(std::string_view path);
  /// The key of a limit keyed on the client's address level or on several parts; false when
  /// the request lacks a part.
  bool composite_key(const limit::limit_spec& s, const limit::address_keys& k,
                     const key_sources& keys, std::string& query, std::uint64_t& key) const;

  std::vector<category_limits> categories_;      ///< in policy order
  std::vector<std::string> claim_paths_{"sub"};  ///< see claim_paths
  std::optional<tier_rules> tiers_;              ///< see tiers
  std::optional<pow::penalty_rules> penalties_;  ///< see penalties
  /// Index of categories_ by name (each route is resolved through it at load).
  std::unordered_map<std::string, std::size_t, core::name_hash, std::equal_to<>> by_name_;
  limit::level_prefixes prefixes_;  ///< address level prefixes
  violation_rules violations_;      ///< reasons by index
  core::siphash_key key_secret_;    ///< keys the hashing of key values
};

}  // namespace tollgate::policy
