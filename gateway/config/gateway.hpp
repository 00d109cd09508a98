#pragma once
/// The gateway file (config/gateway.yaml, docs/design.md §9): listeners, upstreams, routes,
/// secrets, store and logging, plus the policy files it names, read into plain immutable structs.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gateway/config/policy.hpp"
#include "gateway/core/address.hpp"
#include "gateway/core/clock.hpp"

namespace tollgate::config {

/// One certificate of a TLS listener and its key (paths resolved against the gateway file).
struct certificate_files {
  std::string certificate;   ///< PEM certificate chain
  std::string private_key;   ///< PEM private key
  int certificate_line = 0;  ///< where each was written (errors found when loading them)
  int private_key_line = 0;
  std::string path;  ///< its key path: "listeners.public.tls" or "...tls.certificates[1]"
  friend bool operator==(const certificate_files&, const certificate_files&) = default;
};

/// Whether a TLS listener asks its clients for a certificate (docs/design.md §17).
enum class client_verify : std::uint8_t {
  none,      ///< never asked for (no client_ca)
  optional,  ///< asked for; none is fine, an invalid one fails the handshake
  required,  ///< a handshake without a valid one fails
};

/// The header fields a listener forwards its clients' verified certificates in
/// (`client_cert_headers`, docs/design.md §17); "" : that fact is not forwarded.
struct certificate_headers {
  std::string subject;  ///< the subject's distinguished name
  std::string san;      ///< the subjectAltName entries
  std::string sha256;   ///< the SHA-256 fingerprint
  friend bool operator==(const certificate_headers&, const certificate_headers&) = default;
};

/// How an ACME server checks that the gateway answers for a name (docs/design.md §17).
enum class acme_challenge : std::uint8_t {
  http_01,      ///< a key authorization under /.well-known/acme-challenge/ on a plain listener
  tls_alpn_01,  ///< a certificate offered for ALPN acme-tls/1 on the TLS listener itself
};

/// A TLS listener's certificate obtained and renewed automatically (`tls.acme`, RFC 8555,
/// docs/design.md §17).
struct acme_config {
  std::string directory;             ///< the ACME server's directory URL (https://)
  std::string email;                 ///< the account's contact, "": none
  std::vector<std::string> domains;  ///< the certificate's names, lower case; the first names it
  acme_challenge challenge = acme_challenge::http_01;  ///< how the names are proved
  std::string storage;  ///< directory of the account key, certificates and keys (0600)
  std::string ca;       ///< PEM bundle trusted for the ACME server; "": the system's store
  int line = 0;         ///< where `acme` was written
  friend bool operator==(const acme_config&, const acme_config&) = default;
};

/// The certificates of a TLS listener: chosen per handshake by the name the client asks for
/// (SNI) among their names, the first when none matches (docs/design.md §17); and the client
/// certificates it asks for.
struct tls_config {
  /// The first is the default; none only with `acme` (which then serves a placeholder).
  std::vector<certificate_files> certificates;
  std::string client_ca;   ///< PEM bundle of the CAs that sign client certificates; "": none
  int client_ca_line = 0;  ///< where client_ca was written
  client_verify verify = client_verify::none;  ///< none exactly when client_ca is ""
  certificate_headers headers;                 ///< forwarded upstream
  std::optional<acme_config> acme;             ///< a certificate obtained by ACME
  friend bool operator==(const tls_config&, const tls_config&) = default;
};

/// One public listener.
struct listener_config {
  std::string name;               ///< label in logs and metrics
  core::address address;          ///< bind address
  std::uint16_t port = 0;         ///< bind port
  std::optional<tls_config> tls;  ///< terminate TLS
  bool proxy_protocol = false;    ///< expect a PROXY protocol v1/v2 header first
  /// HTTP/2 (docs/design.md §17): offered by ALPN beside http/1.1 on TLS, and spoken on a plain
  /// listener to clients that start with its preface (h2c with prior knowledge).
  bool http2 = false;
};

/// The admin listener (metrics, health, admin API).
struct admin_config {
  core::address address = core::address::from_v4(0x7f000001);  ///< default 127.0.0.1
  std::uint16_t port = 9090;                                   ///< default 9090
  /// Open admin connections at once; more are reset (its descriptors are reserved from the
  /// process's, so a flood of them cannot take the public listeners').
  std::uint32_t max_connections = 64;
  /// To read a whole request, and the longest an admin connection stays idle between two.
  core::duration request_timeout = std::chrono::seconds(10);
};

/// Bounds on every client connection.
struct limits_config {
  std::uint64_t max_header_bytes = 16 * 1024;                   ///< request head; larger: 431
  std::uint64_t max_request_body = 16 * 1024 * 1024;            ///< larger: 413
  core::duration header_timeout = std::chrono::seconds(10);     ///< to receive a request head
  core::duration body_timeout = std::chrono::seconds(30);       ///< to receive a request body
  core::duration keepalive_timeout = std::chrono::seconds(60);  ///< idle between requests
  std::uint32_t max_connections = 10'000;                       ///< per gateway
  /// Open connections from one client (an IPv4 address, an IPv6 /64); more are closed at once.
  std::uint32_t max_connections_per_address = 256;
  /// Open connections from one client network (an IPv4 /24, an IPv6 /48), so that one
  /// subscriber's many addresses cannot fill max_connections; more are closed at once. 0 (not
  /// written): an eighth of the max_connections in force (lowered when descriptors are
  /// short), and never below max_connections_per_address.
  std::uint32_t max_connections_per_network = 0;
  /// A body (request from the client, response from the upstream) must average at least this
  /// many bytes a second once `body_timeout` has passed since it started; 0: no minimum.
  std::uint64_t min_body_rate = 1024;
  /// HTTP/2 streams one connection may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS).
  std::uint32_t max_concurrent_streams = 100;
};

/// One upstream endpoint, `host:port` (host: name or address).
struct endpoint_config {
  std::string host;        ///< as written, without brackets
  std::uint16_t port = 0;  ///< port
  friend bool operator==(const endpoint_config&, const endpoint_config&) = default;
};

/// TLS toward an upstream (docs/design.md §17; paths resolved against the gateway file).
struct upstream_tls_config {
  std::string ca;           ///< PEM CA bundle the servers' certificates must chain to; "": system's
  std::string server_name;  ///< SNI and the name verified; "": each endpoint's host
  std::string certificate;  ///< client certificate, for an upstream that asks for one; or ""
  std::string private_key;  ///< its key
  bool verify = true;       ///< verify the server's certificate and name (false: tests only)
  int ca_line = 0;          ///< where each file was written (errors found when loading them)
  int certificate_line = 0;
  int private_key_line = 0;
  friend bool operator==(const upstream_tls_config&, const upstream_tls_config&) = default;
};

/// A named upstream service.
struct upstream_config {
  std::string name;                                            ///< referenced by routes
  std::vector<endpoint_config> endpoints;                      ///< round-robin
  core::duration connect_timeout = std::chrono::seconds(2);    ///< to open a connection: else 502
  core::duration response_timeout = std::chrono::seconds(30);  ///< to the response head: else 504
  core::duration idle_timeout = std::chrono::seconds(60);      ///< pooled connections closed after
  std::uint32_t max_idle_connections = 64;                     ///< per endpoint and worker
  std::uint32_t max_failures = 5;                              ///< consecutive: endpoint ejected
  core::duration ejection_time = std::chrono::seconds(10);  ///< how long an ejected endpoint rests
  std::optional<upstream_tls_config> tls;                   ///< connect over TLS
};

/// How a route matches the request path.
enum class path_match { any, exact, prefix, glob };

/// How leniently a route compares the request path with its own (all off: byte for byte).
/// Only classification sees the difference; the upstream gets the target as it was sent.
struct path_options {
  bool ignore_trailing_slash = false;   ///< "/a/" and "/a" are the same path
  bool case_insensitive = false;        ///< ASCII letters compared regardless of case
  bool ignore_path_parameters = false;  ///< ";params" dropped from every segment first
  /// Whether any option is on.
  bool any() const noexcept {
    return ignore_trailing_slash || case_insensitive || ignore_path_parameters;
  }
};

/// One route: conditions, then the category and upstream of what matches.
struct route_config {
  std::string method;                                        ///< "" matches any
  path_match kind = path_match::any;                         ///< how `path` is compared
  std::string path;                                          ///< exact path, prefix or glob
  path_options options;                                      ///< how leniently
  std::vector<std::pair<std::string, std::string>> headers;  ///< each must be present and equal
  std::string category;                                      ///< a policy category
  std::string upstream;                                      ///< an upstream name
  std::uint32_t cost = 0;  ///< charged per request it matches; 0: its category's cost
  int line = 0;            ///< where it was written
};

/// The page a browser gets with a 428 (docs/design.md §5 "Browsers"): the built-in one, or an
/// operator's template, with the operator's title and text.
struct pow_page_config {
  std::string template_path;  ///< resolved against the gateway file; "" : the built-in page
  std::string template_text;  ///< the template as read at load ("" with no template_path)
  std::string title = "Checking your browser";  ///< {{title}}
  /// {{text}}
  std::string text =
      "This site asks each visitor's browser to solve a small puzzle before it opens the page. "
      "It takes a few seconds and happens only now and then.";
  std::string file;  ///< the gateway file, for errors found in the template
  int line = 0;      ///< of `template`
};

/// Proof-of-work settings of the gateway.
struct pow_settings {
  std::string secret_env = "TOLLGATE_POW_SECRET";           ///< variable holding the HMAC secret
  core::duration challenge_ttl = std::chrono::seconds(60);  ///< a challenge expires after
  std::uint32_t replay_cache_entries = 100'000;             ///< spent proofs remembered
  /// Hashes per second of the slowest client that should still pass: a challenge of `b` bits
  /// lives at least 8 * 2^b / solver_hash_rate seconds (see pow_state::lifetime).
  std::uint64_t solver_hash_rate = 250'000;
  pow_page_config page;  ///< the browsers' 428 page
  /// Clearance (docs/design.md §16): a valid proof of b bits earns a signed clearance for
  /// base x 2^(b - base_bits), at most `max`; `clearance: off` earns none.
  struct clearance_config {
    bool on = true;
    core::duration base = std::chrono::minutes(10);
    core::duration max = std::chrono::hours(24);
    friend bool operator==(const clearance_config&, const clearance_config&) = default;
  } clearance;
};

/// TLS toward Redis (paths resolved against the gateway file).
struct redis_tls_config {
  std::string ca;           ///< PEM CA bundle that signs the server's certificate
  std::string certificate;  ///< client certificate, when Redis asks for one (tls-auth-clients)
  std::string private_key;  ///< its key
  std::string server_name;  ///< SNI and the name verified; "" : the address's host
  friend bool operator==(const redis_tls_config&, const redis_tls_config&) = default;
};

/// Where limiter state lives.
struct store_config {
  enum class kind { memory, redis };
  enum class failure { local, open, closed };
  kind type = kind::memory;  ///< memory or redis
  /// Redis: one server (`address`), or the seed nodes of a Cluster (`addresses`).
  std::vector<endpoint_config> redis;
  bool cluster = false;                 ///< `addresses`: Redis Cluster
  std::string username;                 ///< ACL user; "": AUTH with the password only
  std::string password_env;             ///< variable holding the password; "": none
  std::optional<redis_tls_config> tls;  ///< TLS toward Redis
  std::string key_prefix = "tg:";       ///< of every key the store writes
  core::duration timeout = std::chrono::milliseconds(5);     ///< per decision
  core::duration connect_timeout = std::chrono::seconds(1);  ///< per connection attempt
  failure fail_mode = failure::local;                        ///< when redis is unreachable
  std::size_t capacity[5] = {1'000'000, 250'000, 1'000'000, 250'000, 100'000};  ///< per table
  /// memory: where a client's standing is kept over a restart (docs/design.md §18); "": not.
  std::string state_file;
  core::duration save_interval = std::chrono::seconds(30);  ///< how often it is written
};

/// Logging.
struct logging_config {
  enum class log_format { text, json };
  /// Where the access log goes (`access_log: false | true | stdout | PATH`).
  enum class destination { off, standard_output, file };
  std::string level = "info";                 ///< trace, debug, info, warn, error or off
  log_format format = log_format::text;       ///< text, or one JSON object a line (log shippers)
  destination access_log = destination::off;  ///< one line per request
  std::string access_log_path;                ///< the file (resolved), when access_log is `file`
  /// Whether requests are logged at all.
  bool access_log_on() const noexcept { return access_log != destination::off; }
};

/// Addresses let through or turned away before anything else (docs/design.md §9), by the client
/// address the request is charged to.
struct access_config {
  std::vector<core::cidr> allow;  ///< never limited, challenged or banned; still counted
  std::vector<core::cidr> deny;   ///< 403 "code":"denied", nothing upstream
};

/// Where a request's token is (docs/design.md §15): a header (Authorization's is "Bearer
/// <token>", any other header's is the whole value) or a cookie.
struct token_source {
  bool cookie = false;                 ///< a cookie, not a header
  std::string name = "Authorization";  ///< the header's or the cookie's name
};

/// `identity.jwt`: how requests' JSON Web Tokens are verified (docs/design.md §15).
struct jwt_config {
  token_source from;      ///< where the token is
  std::string jwks_file;  ///< a JWK Set file (resolved path), or ""
  std::string jwks;       ///< its text, read with the configuration (a reload re-reads it)
  std::string jwks_url;   ///< a JWK Set fetched over HTTP(S), or ""
  core::duration jwks_refresh = std::chrono::minutes(10);  ///< how often jwks_url is fetched
  std::string secret_env;                            ///< the variable holding the HS* secret, or ""
  std::string issuer;                                ///< "iss" required when set
  std::vector<std::string> audience;                 ///< "aud" must name one of these, when set
  std::vector<std::string> algorithms;               ///< the allowed algorithms' names
  core::duration leeway = std::chrono::seconds(30);  ///< for exp, nbf, iat
  bool reject_invalid = true;                        ///< on_invalid: reject (401); false: anonymous
  std::uint32_t cache_entries = 10'000;              ///< verified tokens remembered per worker
  int line = 0;                                      ///< where `jwt` was written
  int jwks_file_line = 0;                            ///< where jwks_file was written
};

/// `identity`: how a request's consumer is known beyond its address.
struct identity_config {
  std::optional<jwt_config> jwt;  ///< verified tokens, when configured
};

/// What SIGTERM does: readiness fails at once, serving goes on for `delay` (load balancers
/// and Kubernetes stop sending), then the listeners close and requests in flight get up to
/// `drain_timeout` to finish.
struct shutdown_config {
  core::duration delay = core::duration::zero();
  core::duration drain_timeout = std::chrono::seconds(10);
};

/// One entry of `hosts` (docs/design.md §15, "Tenants (per Host)"): requests whose Host it
/// names get its routes and its categories; `levels`, `violations` and `pow_counters` stay the
/// gateway's (its policy holds copies of the top level's).
struct host_config {
  /// Lower case: exact names, and "*." followed by a name (one more leading label).
  std::vector<std::string> names;
  std::vector<route_config> routes;       ///< first match wins
  route_config default_route;             ///< the rest
  std::vector<std::string> policy_files;  ///< resolved paths
  policy_config policy;                   ///< what they hold
  int line = 0;                           ///< where the entry was written

  /// Its label on metrics and the first part of its limits' state names: its first name.
  const std::string& label() const noexcept { return names.front(); }
};

/// Everything the gateway runs with, policies included.
struct gateway_config {
  std::string file;                         ///< the gateway file
  std::vector<listener_config> listeners;   ///< at least one
  admin_config admin;                       ///< admin listener
  std::uint32_t workers = 0;                ///< threads; 0 = one per core
  limits_config limits;                     ///< connection bounds
  std::vector<core::cidr> trusted_proxies;  ///< whose X-Forwarded-For is believed
  std::vector<upstream_config> upstreams;   ///< in file order
  std::vector<route_config> routes;         ///< first match wins
  route_config default_route;               ///< the rest
  std::vector<std::string> policy_files;    ///< resolved paths
  policy_config policy;                     ///< what they hold
  pow_settings pow;                         ///< PoW settings
  store_config store;                       ///< limiter store
  logging_config logging;                   ///< logging
  access_config access;                     ///< allow and deny lists
  shutdown_config shutdown;                 ///< how SIGTERM drains
  identity_config identity;                 ///< verified identities (docs/design.md §15)
  std::vector<host_config> hosts;           ///< tenants per Host; empty: none

  /// The upstream called `name`, or nullptr.
  const upstream_config* upstream(const std::string& name) const;
};

/// Reads and validates the gateway file at `path` and every policy file it names (relative to
/// its own folder). Throws config::error naming file, line and key.
gateway_config load_gateway(const std::string& path);

/// coverage_warnings of the top level's policy and of every host entry's.
std::vector<std::string> coverage_warnings(const gateway_config& g);

}  // namespace tollgate::config
