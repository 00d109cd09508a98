#include "gateway/policy/tenants.hpp"

#include <map>

#include "gateway/config/error.hpp"

namespace tollgate::policy {

namespace {

/// The scope of every limit of `p` (by the state name that has it), checked against those of
/// the policies before it: a memory store table or a Redis key must never mix two limits.
void claim_scopes(const compiled_policy& p, const config::policy_config& source,
                  std::map<std::uint32_t, std::string>& scopes) {
  for (std::size_t c = 0; c < p.categories().size(); ++c) {
    const category_limits& category = p.categories()[c];
    for (std::size_t l = 0; l < category.limits.size(); ++l) {
      const limit::limit_spec& s = category.limits[l];
      const auto [at, fresh] = scopes.emplace(s.scope, s.state_name);
      if (!fresh && at->second != s.state_name) {
        const config::category_config& cc = source.categories[c];
        throw config::error(
            cc.file, cc.limits[l].line, "categories." + cc.name + ".limits." + s.name,
            "the state of this limit would share a hash with '" + at->second + "'; rename it");
      }
    }
  }
}

}  // namespace

std::string_view host_name(std::string_view field, host_buffer& out) noexcept {
  field = core::trim(field);
  if (field.empty() || field.front() == '[') return {};  // an IPv6 literal names no entry
  field = field.substr(0, field.find(':'));
  if (!field.empty() && field.back() == '.') field.remove_suffix(1);  // "example.com."
  if (field.empty() || field.size() > out.size()) return {};
  for (std::size_t i = 0; i < field.size(); ++i)
    out[i] = core::ascii_lower(field[i]);
  return {out.data(), field.size()};
}

std::string state_prefix(std::string_view label) {
  return std::string(label) + "@";
}

tenant::tenant(const config::gateway_config& g, const config::host_config& h, core::siphash_key key,
               const compile_options& options)
    : label(h.label()),
      policy(h.policy, key, options),
      routes(h.routes, h.default_route, g, policy) {}

tenants::tenants(const config::gateway_config& g, const compiled_policy& top, core::siphash_key key)
    : claim_paths_(top.claim_paths()) {
  std::map<std::uint32_t, std::string> scopes;
  claim_scopes(top, g.policy, scopes);
  std::size_t next = top.categories().size();
  for (const config::host_config& h : g.hosts) {
    const compile_options options{state_prefix(h.label()), claim_paths_,
                                  static_cast<std::uint16_t>(next)};
    const tenant& t = entries_.emplace_back(g, h, key, options);
    claim_scopes(t.policy, h.policy, scopes);
    claim_paths_ = t.policy.claim_paths();
    next += t.policy.categories().size();
    for (const std::string& name : h.names) {
      if (name.starts_with("*.")) {
        wildcard_.emplace(name.substr(2), entries_.size() - 1);
      } else {
        exact_.emplace(name, entries_.size() - 1);
      }
    }
  }
}

const tenant* tenants::find(std::string_view host) const {
  host_buffer buffer;
  const std::string_view name = host_name(host, buffer);
  if (name.empty()) return nullptr;
  if (const auto it = exact_.find(name); it != exact_.end()) return &entries_[it->second];
  // "*.x" matches one label in front of x: "a.x", never "x" nor "a.b.x".
  const auto dot = name.find('.');
  if (dot == 0 || dot == std::string_view::npos) return nullptr;
  if (const auto it = wildcard_.find(name.substr(dot + 1)); it != wildcard_.end()) {
    return &entries_[it->second];
  }
  return nullptr;
}

}  // namespace tollgate::policy
