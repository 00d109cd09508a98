#pragma once
/// Overrides (docs/design.md §15, "Overrides"): what an operator sets through the admin API
/// for one consumer — a key of a named limit, keys that start with a prefix, or an address or
/// network — either a tier or explicit numbers, until an optional expiry. The rules are data
/// (override_rule); override_set compiles them against one configuration's policies so that a
/// request finds its own in a hash lookup per keyed limit; override_book holds the rules of
/// the process, recompiles them when they or the configuration change, and hands the workers
/// the compiled set.

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gateway/core/address.hpp"
#include "gateway/core/units.hpp"
#include "gateway/limit/request.hpp"
#include "gateway/policy/compiled_policy.hpp"

namespace tollgate::policy {

/// One override as the operator wrote it (and as the store keeps it).
struct override_rule {
  /// What it covers: a key of limit `limit` (exactly, or every key starting with `key`), or
  /// every limit of the clients of `address`.
  enum class target : std::uint8_t { key, key_prefix, address };
  /// Explicit numbers of one tier of a limit.
  struct numbers {
    core::rate rate;
    std::uint32_t burst = 0;
    friend bool operator==(const numbers&, const numbers&) = default;
  };

  std::string id;                                ///< names it (hex of a hash of its target)
  target by = target::key;                       ///< what it covers
  std::string limit;                             ///< key, key_prefix: the limit's name
  std::string key;                               ///< key: the key's value; key_prefix: the prefix
  core::cidr address;                            ///< address: the address or network
  std::string tier;                              ///< the tier it gives; "" when it gives numbers
  std::optional<numbers> short_term, long_term;  ///< the numbers it gives (either or both)
  core::nanos expires = 0;                       ///< when it ends (unix ns); 0: never
  core::nanos created = 0;                       ///< when it was set (unix ns)

  /// Its target as text ("limit per_api_key key k-123", "address 203.0.113.0/24"): two rules
  /// of the same target are one override (a PUT replaces).
  std::string target_text() const;
  friend bool operator==(const override_rule&, const override_rule&) = default;
  /// Whether it holds at unix time `now`.
  bool live(core::nanos now) const noexcept { return expires == 0 || now < expires; }
};

/// The id of overrides of target `target_text`: 16 hex digits of a fixed hash, the same on
/// every replica.
std::string override_id(std::string_view target_text);

/// Why a rule cannot apply to a configuration, or "" when it can: a limit no category has, a
/// limit keyed on the address or global, a tier no policy names, numbers for a limit that has
/// no such tier...
std::string check_rule(const override_rule& r, std::span<const compiled_policy* const> policies);

/// What the overrides in force say of one request.
struct override_match {
  std::uint8_t tier = no_tier;  ///< the tier they give (in the request's policy), or none
  /// By slot of the request's category: the limit that replaces the configured one, or null.
  std::array<const limit::limit_spec*, 32> specs{};
  bool any_spec = false;  ///< some slot has one
};

/// Rules compiled against the policies of one configuration.
/// Thread safety: immutable after construction; shared by every worker.
class override_set {
 public:
  /// `rules` against `policies` (the top level's, then each host entry's; categories numbered
  /// by category_limits::index across them). Rules that cannot apply are left out.
  override_set(const std::vector<override_rule>& rules,
               std::span<const compiled_policy* const> policies);

  /// Whether no rule applies to anything.
  bool empty() const noexcept { return empty_; }

  /// The overrides of a request of category `c` (of policy `p`) from `client` with `keys`, at
  /// unix time `now`, into `out`; whether any applies. A key override comes before an
  /// address one; an exact key before a prefix, a longer prefix before a shorter.
  bool find(const compiled_policy& p, const category_limits& c, const core::address& client,
            const key_sources& keys, core::nanos now, override_match& out) const;

 private:
  /// One rule compiled for one category.
  struct entry {
    core::nanos expires = 0;               ///< 0: never
    std::uint8_t tier = no_tier;           ///< in the category's policy
    std::vector<limit::limit_spec> specs;  ///< by slot (numbers); empty: a tier
    std::uint32_t replaced = 0;            ///< slots of `specs` that replace
  };
  /// The key overrides of one limit of one category.
  struct slot_rules {
    std::uint8_t slot = 0;
    std::unordered_map<std::string, std::uint32_t, core::name_hash, std::equal_to<>> exact;
    std::vector<std::pair<std::string, std::uint32_t>> prefixes;  ///< longest first
  };
  /// What one category has.
  struct category_rules {
    std::vector<entry> entries;
    std::vector<slot_rules> slots;                                ///< keyed limits with rules
    std::vector<std::pair<core::cidr, std::uint32_t>> addresses;  ///< longest prefix first
  };

  std::vector<category_rules> by_category_;  ///< by category_limits::index
  bool empty_ = true;
};

/// The overrides of the process: the rules, and their compiled sets for the configurations
/// in force.
/// Thread safety: every member from any thread. Writers (the admin API, the Redis follower,
/// reloads) serialise on a mutex; workers read `version` (one load) and take a set under the
/// mutex only when it moved.
class override_book {
 public:
  /// Most overrides held.
  static constexpr std::size_t capacity = 1024;

  /// What put() did.
  enum class placed : std::uint8_t { added, replaced, full };
  /// Puts `r` (replacing the rule of the same id).
  placed put(override_rule r);
  /// Removes the rule `id`; whether there was one.
  bool remove(std::string_view id);
  /// Replaces every rule (what the shared store holds); whether anything changed.
  bool replace_all(std::vector<override_rule> rules);
  /// The rules that hold at `now`, by id.
  std::vector<override_rule> list(core::nanos now) const;
  /// The rule `id`, if there is one.
  std::optional<override_rule> get(std::string_view id) const;

  /// Compiles the rules against configuration `generation` (whose policies `policies` are
  /// kept alive by `owner`) and keeps them compiled for it while `owner` lives.
  void attach(std::uint64_t generation, std::vector<const compiled_policy*> policies,
              std::weak_ptr<const void> owner);

  /// Moves whenever a compiled set changes.
  std::uint64_t version() const noexcept { return version_.load(std::memory_order_acquire); }
  /// The set compiled for configuration `generation` (null when none is, or it is empty).
  std::shared_ptr<const override_set> compiled(std::uint64_t generation) const;

 private:
  struct attached {
    std::uint64_t generation = 0;
    std::vector<const compiled_policy*> policies;
    std::weak_ptr<const void> owner;
    std::shared_ptr<const override_set> set;
  };
  /// Recompiles for every configuration alive; call with mu_ held.
  void recompile();

  mutable std::mutex mu_;
  std::vector<override_rule> rules_;  ///< by id
  std::vector<attached> attached_;
  std::atomic<std::uint64_t> version_{0};
};

}  // namespace tollgate::policy
