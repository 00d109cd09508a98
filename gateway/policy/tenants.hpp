#pragma once
/// Tenants per Host (docs/design.md §15, "Tenants (per Host)"): each `hosts` entry of the
/// gateway file compiled into its own policy and routes, and the lookup of a request's Host
/// among their names.

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gateway/config/gateway.hpp"
#include "gateway/core/siphash.hpp"
#include "gateway/core/text.hpp"
#include "gateway/policy/compiled_policy.hpp"
#include "gateway/policy/router.hpp"

namespace tollgate::policy {

/// Room for the longest DNS name.
using host_buffer = std::array<char, 253>;

/// The name a Host field's value names, for matching: without its port and one trailing dot,
/// in lower case, written into `out`; "" for a value no entry can name (empty, an IP literal
/// in brackets, longer than a DNS name).
std::string_view host_name(std::string_view field, host_buffer& out) noexcept;

/// The state-name prefix of the host entry labelled `label`: "api.example.com@".
std::string state_prefix(std::string_view label);

/// One host entry, compiled.
struct tenant {
  std::string label;       ///< its first name: its metrics' `host` label
  compiled_policy policy;  ///< its categories, their state named under its label
  router routes;           ///< its routes, to its categories

  /// Compiles entry `h` of `g`; its categories numbered from options.first_index.
  tenant(const config::gateway_config& g, const config::host_config& h, core::siphash_key key,
         const compile_options& options);
};

/// Every host entry of a configuration, compiled, and their names.
/// Thread safety: immutable after construction; shared by all workers through a snapshot.
class tenants {
 public:
  /// Compiles the entries of `g` after its top level `top` (numbering their categories after
  /// its, extending its claim paths). Throws config::error naming the limit whose state would
  /// share a hash with another's (in practice never).
  tenants(const config::gateway_config& g, const compiled_policy& top, core::siphash_key key);

  /// The entry whose names match `host` (a Host field's value): an exact name before a
  /// wildcard "*.x", which matches one more label in front of x; null when none does.
  const tenant* find(std::string_view host) const;
  /// The entries in file order.
  const std::deque<tenant>& entries() const noexcept { return entries_; }
  /// Whether there is none.
  bool empty() const noexcept { return entries_.empty(); }
  /// The claim paths of the top level's and every entry's limits and tiers, in the order
  /// each compiled_policy indexes them: what the token verifier reads.
  const std::vector<std::string>& claim_paths() const noexcept { return claim_paths_; }

 private:
  using name_index = std::unordered_map<std::string, std::size_t, core::name_hash, std::equal_to<>>;
  std::deque<tenant> entries_;            ///< a deque: routers point into their policies
  name_index exact_;                      ///< exact name -> entry
  name_index wildcard_;                   ///< "x" of "*.x" -> entry
  std::vector<std::string> claim_paths_;  ///< see claim_paths
};

}  // namespace tollgate::policy
