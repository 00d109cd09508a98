#pragma once
/// A limit as data (docs/design.md §3, "keys as data"): a name, where its key comes from, its
/// tiers. The four address levels are limits like any other, keyed on the client's address.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/core/calendar.hpp"
#include "gateway/limit/gcra.hpp"
#include "gateway/limit/levels.hpp"

namespace tollgate::limit {

using core::address_part;
using core::key_source;
using core::source_name;

/// Tables of the in-process store: one per address level, then one for every other key.
inline constexpr std::uint8_t keyed_table = 4;
/// Number of such tables.
inline constexpr std::size_t table_count = 5;

/// One part of a limit's key: where it comes from and its name. A plain limit has one; a
/// composite key (`key: [ {header: X-Api-Key}, individual ]`) several.
struct key_part {
  key_source source = key_source::header;  ///< header, query, cookie, bearer, claim, individual
                                           ///< or network
  std::string name;                        ///< header (lower case), parameter, cookie or claim
  std::int16_t claim = -1;                 ///< claim: its index among the verifier's paths
};

/// A calendar quota (docs/design.md §3, "Quotas"): at most `limit` of cost per window of
/// `period`, the window fixed to the UTC calendar.
struct quota_params {
  std::uint32_t limit = 0;                  ///< cost admitted per window; 0: not a quota
  core::period period = core::period::day;  ///< the window
  bool tiered = false;                      ///< scaled by the consumer's tier (docs/design.md §15)
  friend bool operator==(const quota_params&, const quota_params&) = default;
};

/// One limit of one category, compiled. Owned by the configuration snapshot; requests point
/// at it.
struct limit_spec {
  std::string name;        ///< in headers, metric labels and the admin API: "per_api_key"
  std::string state_name;  ///< stable name of its state: "auth/per_api_key/header:x-api-key"
  key_source source = key_source::address;       ///< where its key comes from
  level address_level = level::ipv4_individual;  ///< which prefix, when keyed on the address
  std::string key_name;         ///< header (lower case), query parameter, cookie or claim name
  std::vector<key_part> parts;  ///< the key's parts (composite: several; else one)
  std::array<gcra_params, 2> tiers{};  ///< by tier; burst 0: tier not configured
  /// A quota instead of tiers (then both tiers' burst is 0); its limit is 0 otherwise.
  quota_params quota;
  address_part part = address_part::level;  ///< keyed on the address: which key
  std::uint32_t scope = 0;                  ///< scope_of(state_name): names its state in tables
  bool shadow = false;                      ///< evaluated, never enforced (docs/design.md §12)
  std::uint8_t slot = 0;                    ///< its index among its category's limits

  /// Requests in flight at once per key instead of tiers (docs/design.md §15); 0: not one.
  std::uint32_t concurrency = 0;
  /// on_excess (docs/design.md §16 "Delay instead of reject"): a request its tiers would admit
  /// within this time is held until then and admitted instead of refused; 0: refused.
  nanos delay = 0;
  /// on_excess: most requests one worker holds at once under this limit.
  std::uint32_t max_delayed = 0;

  /// Whether it is a calendar quota rather than GCRA tiers.
  bool is_quota() const noexcept { return quota.limit != 0; }
  /// The address level whose key it takes from a client of the given family.
  level level_for(bool v6) const noexcept {
    switch (part) {
      case address_part::individual:
        return v6 ? level::ipv6_subnet : level::ipv4_individual;
      case address_part::network:
        return v6 ? level::ipv6_provider : level::ipv4_network;
      case address_part::level:
        break;
    }
    return address_level;
  }
  /// The in-process table its keys live in, for a client of the given family: a limit keyed on
  /// the address shares the table of that address level.
  std::uint8_t table(bool v6 = false) const noexcept {
    return source == key_source::address ? static_cast<std::uint8_t>(level_for(v6)) : keyed_table;
  }
  /// Whether a proof of work may pay past it: address levels only (docs/design.md §5), never a
  /// quota, which is a consumer's budget rather than a defence.
  bool payable() const noexcept { return source == key_source::address && !is_quota(); }
};

/// The 32-bit scope of a state name: a fixed hash, so that every process (and every replica)
/// names the same limit alike; never 0 (0 marks an empty slot).
std::uint32_t scope_of(std::string_view state_name) noexcept;

}  // namespace tollgate::limit
