#pragma once
/// Internal to config/: the readers of routes, shared by the gateway file's top level and its
/// `hosts` entries (docs/design.md §9 and §15, "Tenants (per Host)").

#include <string>
#include <string_view>

#include "gateway/config/gateway.hpp"
#include "gateway/config/yaml_reader.hpp"

namespace tollgate::config {

/// `path` resolved against the folder of `base_file` (as written when absolute).
std::string resolve(const std::string& base_file, const std::string& path);

/// `routes` (optional) and `default_route` of `root` into g.routes and g.default_route,
/// checked against g.policy's categories and g's upstreams.
void read_routes(const yaml_node& root, gateway_config& g);

/// `hosts`: every entry's names, routes and policy files into g.hosts. g's upstreams and
/// policy are read already.
void read_hosts(const yaml_node& hosts, gateway_config& g);

/// Whether `name` (lower case) may name a host entry: a DNS name of labels of a-z, 0-9, '-'
/// and '_', or "*." followed by one.
bool valid_host_pattern(std::string_view name);

}  // namespace tollgate::config
