// The routes of the gateway file (docs/design.md §9) and its `hosts` entries (§15, "Tenants
// (per Host)"): each entry routes to the categories of its own policy files.

#include "gateway/config/routes.hpp"

#include <algorithm>
#include <unordered_map>

#include "gateway/core/text.hpp"

namespace tollgate::config {

namespace {

bool valid_method(const std::string& m) {
  return !m.empty() && m.size() <= 32 &&
         std::all_of(m.begin(), m.end(), [](char c) { return c >= 'A' && c <= 'Z'; });
}

/// The options that loosen path comparison (see path_options); only next to a path.
path_options read_path_options(const yaml_node& n, const route_config& r) {
  path_options o;
  for (auto [key, flag] :
       {std::pair{"ignore_trailing_slash", &path_options::ignore_trailing_slash},
        std::pair{"case_insensitive", &path_options::case_insensitive},
        std::pair{"ignore_path_parameters", &path_options::ignore_path_parameters}}) {
    if (auto v = n.get(key)) {
      o.*flag = v->as_bool();
      if (r.kind == path_match::any) v->fail("needs one of path, path_prefix and path_glob");
      // A request path never has a ';' left when this compares it.
      if (o.ignore_path_parameters && r.path.find(';') != std::string::npos) {
        v->fail("the path has a ';' parameter, which requests are compared without");
      }
    }
  }
  return o;
}

void read_match(const yaml_node& n, route_config& r) {
  n.expect_keys({"method", "path", "path_prefix", "path_glob", "header", "ignore_trailing_slash",
                 "case_insensitive", "ignore_path_parameters"});
  if (auto m = n.get("method")) {
    r.method = m->as_string();
    if (!valid_method(r.method)) {
      m->fail("invalid method '" + r.method + "' (expected an upper-case token such as GET)");
    }
  }
  int paths = 0;
  for (auto [key, kind] :
       {std::pair{"path", path_match::exact}, std::pair{"path_prefix", path_match::prefix},
        std::pair{"path_glob", path_match::glob}}) {
    if (auto p = n.get(key)) {
      if (++paths > 1) p->fail("use only one of path, path_prefix and path_glob");
      r.kind = kind;
      r.path = p->as_string();
      if (r.path.empty() || r.path.front() != '/') p->fail("must start with /");
    }
  }
  r.options = read_path_options(n, r);
  if (auto h = n.get("header")) {
    for (const auto& [name, value] : h->entries()) {
      if (!valid_header_name(name)) value.fail("invalid header name");
      r.headers.emplace_back(name, value.as_string());
    }
  }
}

/// The policy's categories by name: every route looks its own up (a file of thousands of
/// routes and categories loads in linear time).
using category_index = std::unordered_map<std::string_view, const category_config*>;

route_config read_route_target(const yaml_node& n, route_config r, const gateway_config& g,
                               const category_index& categories) {
  const yaml_node category = n.at("category");
  r.category = category.as_string();
  const auto found = categories.find(r.category);
  if (found == categories.end()) {
    category.fail("unknown category '" + r.category + "' (not defined in the policy files)");
  }
  const yaml_node upstream = n.at("upstream");
  r.upstream = upstream.as_string();
  if (g.upstream(r.upstream) == nullptr) upstream.fail("unknown upstream '" + r.upstream + "'");
  if (auto cost = n.get("cost")) {
    // Checked against the category's bursts here, where the route's own line is known.
    r.cost = static_cast<std::uint32_t>(cost->as_uint(1, 1'000'000));
    const std::string fault = cost_fault(*found->second, r.cost);
    if (!fault.empty()) cost->fail(fault + " in category " + r.category);
  }
  r.line = n.line();
  return r;
}

/// `routes` and `default_route` of `n` (the top level or a host entry) into `routes` and
/// `default_route`, against the categories of `policy`.
void read_route_list(const yaml_node& n, const gateway_config& g, const policy_config& policy,
                     std::vector<route_config>& routes, route_config& default_route) {
  category_index categories;
  for (const auto& c : policy.categories)
    categories.emplace(c.name, &c);
  if (auto list = n.get("routes")) {
    for (const yaml_node& item : list->items()) {
      item.expect_keys({"match", "category", "upstream", "cost"});
      route_config r;
      read_match(item.at("match"), r);
      routes.push_back(read_route_target(item, std::move(r), g, categories));
    }
  }
  const yaml_node d = n.at("default_route");
  d.expect_keys({"category", "upstream", "cost"});
  default_route = read_route_target(d, route_config{}, g, categories);
}

/// One label of a DNS name: 1 to 63 of a-z, 0-9, '-' and '_'.
bool valid_label(std::string_view l) {
  return !l.empty() && l.size() <= 63 && std::all_of(l.begin(), l.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  });
}

/// One entry of `hosts`; `taken` maps each name already listed to its entry's index.
host_config read_host(const yaml_node& n, const gateway_config& g,
                      std::unordered_map<std::string, std::size_t>& taken) {
  n.expect_keys({"names", "routes", "default_route", "policies"});
  host_config h;
  h.line = n.line();
  const yaml_node names = n.at("names");
  for (const yaml_node& item : names.items()) {
    std::string name = item.as_string();
    std::transform(name.begin(), name.end(), name.begin(), core::ascii_lower);
    if (!valid_host_pattern(name)) {
      item.fail("invalid host name '" + name +
                "' (expected a DNS name, or \"*.\" and one; without a port)");
    }
    const auto [at, fresh] = taken.try_emplace(name, g.hosts.size());
    if (!fresh) {
      item.fail("'" + name + "' is already a name of hosts[" + std::to_string(at->second) + "]");
    }
    h.names.push_back(std::move(name));
  }
  if (h.names.empty()) names.fail("list at least one name");
  const yaml_node policies = n.at("policies");
  for (const yaml_node& p : policies.items())
    h.policy_files.push_back(resolve(g.file, p.as_string()));
  if (h.policy_files.empty()) policies.fail("at least one policy file is needed");
  h.policy = load_host_policies(h.policy_files, g.policy);
  read_route_list(n, g, h.policy, h.routes, h.default_route);
  return h;
}

}  // namespace

bool valid_host_pattern(std::string_view name) {
  if (name.starts_with("*.")) name.remove_prefix(2);
  if (name.empty() || name.size() > 253) return false;
  while (true) {
    const auto dot = name.find('.');
    if (!valid_label(name.substr(0, dot))) return false;
    if (dot == std::string_view::npos) return true;
    name.remove_prefix(dot + 1);
  }
}

void read_routes(const yaml_node& root, gateway_config& g) {
  read_route_list(root, g, g.policy, g.routes, g.default_route);
}

void read_hosts(const yaml_node& hosts, gateway_config& g) {
  std::unordered_map<std::string, std::size_t> taken;
  for (const yaml_node& n : hosts.items())
    g.hosts.push_back(read_host(n, g, taken));
}

}  // namespace tollgate::config
