#pragma once
/// A limit as data (docs/design.md §3, "keys as data"): a name, where its key comes from, its
/// tiers. The four address levels are limits like any other, keyed on the client's address.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/limit/gcra.hpp"
#include "gateway/limit/levels.hpp"

namespace tollgate::limit {

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
  std::uint32_t scope = 0;             ///< scope_of(state_name): names its state in tables
  bool shadow = false;                 ///< evaluated, never enforced (docs/design.md §12)
  std::uint8_t slot = 0;               ///< its index among its category's limits

  /// The in-process table its keys live in.
  std::uint8_t table() const noexcept {
    return source == key_source::address ? static_cast<std::uint8_t>(address_level) : keyed_table;
  }
  /// Whether a proof of work may pay past it: address levels only (docs/design.md §5).
  bool payable() const noexcept { return source == key_source::address; }
};

/// The 32-bit scope of a state name: a fixed hash, so that every process (and every replica)
/// names the same limit alike; never 0 (0 marks an empty slot).
std::uint32_t scope_of(std::string_view state_name) noexcept;

}  // namespace tollgate::limit
