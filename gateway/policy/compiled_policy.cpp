#include "gateway/policy/compiled_policy.hpp"

#include <algorithm>
#include <cctype>

#include "gateway/limit/headers.hpp"

namespace tollgate::policy {

namespace {

using limit::level;

/// Stable name of a limit's state: changing a prefix or identity header starts it afresh,
/// changing only rates or bursts keeps it (the stored tat stays meaningful).
std::string scope_name(const std::string& category, level l, const config::category_config& c,
                       const limit::level_prefixes& p) {
  std::string name = category + "/" + std::string(limit::level_name(l));
  if (l < level::global) name += "/" + std::to_string(limit::prefix_of(l, p));
  if (l == level::identity) {
    std::string header = c.limits[static_cast<std::size_t>(l)]->header;
    std::transform(header.begin(), header.end(), header.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    name += "/" + header;
  }
  return name;
}

std::string family_policy_field(const category_limits& c, level fine, level coarse) {
  std::vector<limit::limit_group> groups;
  for (level l : {fine, coarse, level::global, level::identity}) {
    const auto& g = c.groups[static_cast<std::size_t>(l)];
    if (g) groups.push_back({l, 0, &*g});
  }
  return limit::policy_field(groups);
}

}  // namespace

compiled_policy::compiled_policy(const config::policy_config& policy, limit::scope_registry& scopes,
                                 core::siphash_key identity_key)
    : violations_(compile_violations(policy)), identity_key_(identity_key) {
  const auto& p = policy.prefixes;
  prefixes_ = {p.ipv4_individual, p.ipv4_network, p.ipv6_subnet, p.ipv6_provider};
  categories_.reserve(policy.categories.size());
  for (const config::category_config& cc : policy.categories) {
    category_limits c;
    c.name = cc.name;
    c.cost = cc.cost;
    for (std::size_t i = 0; i < limit::level_count; ++i) {
      if (!cc.limits[i]) continue;
      limit::group_params g;
      for (int t = 0; t < 2; ++t) {
        const auto& tc = cc.limits[i]->tiers[t];
        if (tc) g.tiers[t] = limit::make_params(tc->rate, tc->burst);
      }
      g.scope = scopes.id(scope_name(cc.name, static_cast<level>(i), cc, prefixes_));
      c.groups[i] = g;
      if (static_cast<level>(i) == level::identity) c.identity_header = cc.limits[i]->header;
    }
    c.policy_field[0] = family_policy_field(c, level::ipv4_individual, level::ipv4_network);
    c.policy_field[1] = family_policy_field(c, level::ipv6_subnet, level::ipv6_provider);
    c.pow = compile_pow(cc, violations_);
    categories_.push_back(std::move(c));
  }
}

const category_limits* compiled_policy::find(std::string_view name) const noexcept {
  for (const auto& c : categories_) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

limit::limit_request compiled_policy::request(const category_limits& c,
                                              const limit::address& client,
                                              std::string_view identity,
                                              core::nanos now) const noexcept {
  limit::limit_request r;
  r.cost = c.cost;
  r.now = now;
  const limit::address_keys k = limit::keys_of(client, prefixes_);
  auto add = [&](level l, std::uint64_t key) {
    const auto& g = c.groups[static_cast<std::size_t>(l)];
    if (g) r.groups[r.group_count++] = {l, key, &*g};
  };
  add(k.fine, k.fine_key);
  add(k.coarse, k.coarse_key);
  add(level::global, 0);
  if (!identity.empty()) add(level::identity, core::siphash13(identity, identity_key_));
  return r;
}

}  // namespace tollgate::policy
