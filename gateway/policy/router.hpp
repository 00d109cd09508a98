#pragma once
/// Classification: a request's method, path and headers -> its route (category + upstream),
/// by the ordered rules of the gateway file; the first match wins, the default route the rest.

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gateway/config/gateway.hpp"
#include "gateway/policy/compiled_policy.hpp"

namespace tollgate::policy {

/// The parts of a request the router reads, without any HTTP library type.
struct request_view {
  std::string_view method;  ///< e.g. "GET"
  std::string_view path;    ///< normalised path (see normalize_path)
  /// The value of header `name` (case-insensitive), or "" when absent.
  std::string_view (*header)(const void* context, std::string_view name) = nullptr;
  const void* context = nullptr;  ///< passed to `header`
};

class tenants;

/// Where a classified request goes.
struct route {
  const category_limits* category = nullptr;  ///< never null
  /// The compiled policy `category` belongs to: the top level's or a host entry's (docs/
  /// design.md §15, "Tenants (per Host)"); its tiers and keys apply. Never null.
  const compiled_policy* policy = nullptr;
  std::size_t upstream = 0;  ///< index into gateway_config::upstreams
  std::uint32_t cost = 1;    ///< charged per request: the route's, or its category's
  int line = 0;              ///< of the rule in the gateway file; 0: default
};

/// Reduces a request target to the path that routes match: origin-form or absolute-form,
/// query and fragment dropped, every %XX decoded, repeated slashes merged, `.` and `..`
/// segments resolved. Returns false for a target that is not a valid path (bad escape, NUL,
/// `..` above the root, asterisk or authority form): the request gets 400.
bool normalize_path(std::string_view target, std::string& out);

/// `*` matches within one segment, `**` across segments; linear in practice, never exponential.
/// With `case_insensitive`, ASCII letters match regardless of case.
bool glob_match(std::string_view pattern, std::string_view path,
                bool case_insensitive = false) noexcept;

/// Writes `path` (normalised) to `out` with the `;parameters` of every segment dropped, then
/// the `.`, `..` and empty segments this uncovers (`/a/..;/b`) resolved as normalize_path
/// would, `..` stopping at the root: the path a servlet container routes `/a;jsessionid=1` by.
void strip_path_parameters(std::string_view path, std::string& out);

/// Whether `path` (normalised) matches a route's `pattern` of `kind` under `options`.
/// Allocation-free; ignore_path_parameters is the caller's (strip_path_parameters first).
bool path_matches(config::path_match kind, std::string_view pattern, std::string_view path,
                  const config::path_options& options) noexcept;

/// The compiled routing table.
/// Thread safety: immutable after construction.
class router {
 public:
  /// Compiles the routes of `g` against the categories of `p` (which must outlive this). With
  /// `hosts`, a request whose Host names one of its entries takes that entry's routes.
  router(const config::gateway_config& g, const compiled_policy& p, const tenants* hosts = nullptr);
  /// Compiles `routes` and `default_route` (a host entry's) against `p` and `g`'s upstreams.
  router(const std::vector<config::route_config>& routes, const config::route_config& default_route,
         const config::gateway_config& g, const compiled_policy& p);
  /// The first matching route, else the default route. Allocates only for a path with a ';'
  /// when some route ignores path parameters (the stripped path, built once per call).
  const route& match(const request_view& r) const;

 private:
  struct rule {
    std::string method;                                        ///< "" any
    config::path_match kind;                                   ///< how to compare
    std::string path;                                          ///< pattern
    config::path_options options;                              ///< how leniently
    std::vector<std::pair<std::string, std::string>> headers;  ///< name, value
    policy::route target;                                      ///< where it sends
  };
  bool matches(const rule& r, const request_view& v, std::string_view path) const noexcept;

  const tenants* hosts_ = nullptr;  ///< host entries looked at first; null: none
  std::vector<rule> rules_;         ///< in file order
  route default_;                   ///< the default route
  bool strips_parameters_ = false;  ///< some rule ignores path parameters
};

}  // namespace tollgate::policy
