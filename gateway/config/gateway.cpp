#include "gateway/config/gateway.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unordered_map>

#include "gateway/config/routes.hpp"
#include "gateway/config/yaml_reader.hpp"
#include "gateway/core/text.hpp"

namespace tollgate::config {

std::string resolve(const std::string& base_file, const std::string& path) {
  const std::filesystem::path p(path);
  if (p.is_absolute()) return path;
  return (std::filesystem::path(base_file).parent_path() / p).lexically_normal().string();
}

namespace {

namespace fs = std::filesystem;

/// Whether `h` may be an upstream's host name (not an IP literal): letters, digits, '-', '.'
/// and '_', at most 253 bytes. A request's Host is checked by protocol::valid_host.
bool valid_dns_name(std::string_view h) {
  return !h.empty() && h.size() <= 253 && std::all_of(h.begin(), h.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_';
  });
}

/// A path relative to the gateway file that must be readable now.
std::string readable_file(const yaml_node& n, const std::string& base_file) {
  const std::string path = resolve(base_file, n.as_string());
  std::error_code ec;
  if (fs::is_directory(path, ec)) n.fail("cannot read file '" + path + "': it is a directory");
  std::ifstream in(path);
  if (!in) n.fail("cannot read file '" + path + "': " + std::strerror(errno));
  return path;
}

core::address read_address(const yaml_node& n) {
  const std::string s = n.as_string();
  const auto a = core::address::parse(s);
  if (!a) n.fail("invalid address '" + s + "' (expected an IPv4 or IPv6 address)");
  return *a;
}

/// A listening port; 0 lets the kernel choose (tests, ephemeral setups).
std::uint16_t read_port(const yaml_node& n) {
  return static_cast<std::uint16_t>(n.as_uint(0, 65535));
}

/// `host:port` or `[v6]:port`.
endpoint_config read_endpoint(const yaml_node& n) {
  const std::string s = n.as_string();
  auto bad = [&]() { n.fail("invalid endpoint '" + s + "' (expected host:port)"); };
  const auto colon = s.rfind(':');
  if (colon == std::string::npos) bad();
  std::string host = s.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
    if (!core::address::parse(host)) bad();
  } else if (!valid_dns_name(host)) {
    bad();
  }
  const auto port = core::parse_uint(std::string_view(s).substr(colon + 1), 65535);
  if (!port || *port == 0) bad();
  return {host, static_cast<std::uint16_t>(*port)};
}

core::duration positive_duration(const yaml_node& n) {
  const core::duration d = n.as_duration();
  if (d <= core::duration::zero()) n.fail("must be longer than 0");
  return d;
}

/// A TLS listener's client certificates (docs/design.md §17): `client_ca`, `client_verify`,
/// `client_cert_headers`.
void read_client_certificates(const yaml_node& t, const std::string& file, tls_config& tls) {
  const auto ca = t.get("client_ca");
  if (ca) {
    tls.client_ca = readable_file(*ca, file);
    tls.client_ca_line = ca->line();
    tls.verify = client_verify::optional;
  }
  if (auto v = t.get("client_verify")) {
    if (!ca) v->fail("client_verify needs client_ca");
    const std::string w = v->as_string();
    if (w != "optional" && w != "required") {
      v->fail("expected optional or required, not '" + w + "'");
    }
    tls.verify = w == "required" ? client_verify::required : client_verify::optional;
  }
  if (auto h = t.get("client_cert_headers")) {
    if (!ca) h->fail("client_cert_headers needs client_ca");
    h->expect_keys({"subject", "san", "sha256"});
    if (h->entries().empty()) h->fail("name at least one of subject, san, sha256");
    std::vector<std::string> seen;
    auto name = [&](const char* key, std::string& out) {
      const auto v = h->get(key);
      if (!v) return;
      out = v->as_string();
      if (!valid_header_name(out)) v->fail("invalid header name '" + out + "'");
      // Fields the gateway sets, frames by or consumes itself cannot carry a certificate.
      for (const char* own :
           {"host", "content-length", "transfer-encoding", "connection", "upgrade", "te", "trailer",
            "keep-alive", "proxy-connection", "cookie", "expect", "x-forwarded-for",
            "x-forwarded-proto", "x-real-ip"}) {
        if (core::iequals(out, own)) v->fail("header '" + out + "' is set by the gateway");
      }
      for (const std::string& s : seen) {
        if (core::iequals(s, out)) v->fail("header '" + out + "' named twice");
      }
      seen.push_back(out);
    };
    name("subject", tls.headers.subject);
    name("san", tls.headers.san);
    name("sha256", tls.headers.sha256);
  }
}

/// A TLS listener's `acme` (docs/design.md §17).
acme_config read_acme(const yaml_node& n, const std::string& file) {
  n.expect_keys({"directory", "email", "domains", "challenge", "storage", "ca"});
  acme_config a;
  a.line = n.line();
  const yaml_node dir = n.at("directory");
  a.directory = dir.as_string();
  if (!a.directory.starts_with("https://") || a.directory.size() == 8) {
    dir.fail("expected an https:// URL, not '" + a.directory + "'");
  }
  if (auto e = n.get("email")) {
    a.email = e->as_string();
    const auto at = a.email.find('@');
    if (at == std::string::npos || at == 0 || at + 1 == a.email.size() ||
        a.email.find_first_of(" ,<>") != std::string::npos) {
      e->fail("invalid email address '" + a.email + "'");
    }
  }
  const yaml_node domains = n.at("domains");
  const auto items = domains.items();
  if (items.empty()) domains.fail("name at least one domain");
  if (items.size() > 100) domains.fail("at most 100 domains");
  for (const yaml_node& d : items) {
    std::string name = d.as_string();
    for (char& ch : name)
      ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (!valid_dns_name(name) || name.starts_with('.') || name.ends_with('.') ||
        core::address::parse(name)) {
      d.fail("invalid domain '" + d.as_string() + "' (expected a DNS name, no wildcard)");
    }
    if (std::find(a.domains.begin(), a.domains.end(), name) != a.domains.end()) {
      d.fail("domain '" + name + "' named twice");
    }
    a.domains.push_back(std::move(name));
  }
  if (auto c = n.get("challenge")) {
    const std::string w = c->as_string();
    if (w != "http-01" && w != "tls-alpn-01") {
      c->fail("expected http-01 or tls-alpn-01, not '" + w + "'");
    }
    a.challenge = w == "http-01" ? acme_challenge::http_01 : acme_challenge::tls_alpn_01;
  }
  const yaml_node storage = n.at("storage");
  a.storage = resolve(file, storage.as_string());
  std::error_code ec;
  if (fs::exists(a.storage, ec) && !fs::is_directory(a.storage, ec)) {
    storage.fail("'" + a.storage + "' is not a directory");
  }
  if (auto c = n.get("ca")) a.ca = readable_file(*c, file);
  return a;
}

listener_config read_listener(const yaml_node& n, const std::string& file) {
  n.expect_keys({"name", "address", "port", "tls", "proxy_protocol", "http2"});
  listener_config l;
  const yaml_node name = n.at("name");
  l.name = name.as_string();
  if (!valid_name(l.name)) name.fail("invalid listener name (use a-z, 0-9, _ and -)");
  l.address = read_address(n.at("address"));
  l.port = read_port(n.at("port"));
  if (auto t = n.get("tls")) {
    t->expect_keys({"certificate", "private_key", "certificates", "client_ca", "client_verify",
                    "client_cert_headers", "acme"});
    auto pair = [&](const yaml_node& p, std::string path) {
      return certificate_files{readable_file(p.at("certificate"), file),
                               readable_file(p.at("private_key"), file), p.at("certificate").line(),
                               p.at("private_key").line(), std::move(path)};
    };
    tls_config tls;
    const std::string base = "listeners." + l.name + ".tls";
    if (auto list = t->get("certificates")) {
      // Several certificates, chosen by SNI (docs/design.md §17); the first is the default.
      if (t->get("certificate") || t->get("private_key")) {
        list->fail("either certificate and private_key, or certificates: not both");
      }
      const auto items = list->items();
      if (items.empty()) list->fail("name at least one certificate");
      if (items.size() > 100) list->fail("at most 100 certificates");
      for (std::size_t i = 0; i < items.size(); ++i) {
        items[i].expect_keys({"certificate", "private_key"});
        tls.certificates.push_back(
            pair(items[i], base + ".certificates[" + std::to_string(i) + "]"));
      }
    } else if (!t->get("acme") || t->get("certificate") || t->get("private_key")) {
      tls.certificates.push_back(pair(*t, base));
    }
    if (auto a = t->get("acme")) tls.acme = read_acme(*a, file);
    read_client_certificates(*t, file, tls);
    l.tls = std::move(tls);
  }
  if (auto p = n.get("proxy_protocol")) l.proxy_protocol = p->as_bool();
  if (auto h = n.get("http2")) l.http2 = h->as_bool();
  return l;
}

/// Two sockets on one port collide when either binds the wildcard or both the same address.
bool collides(const core::address& a, std::uint16_t pa, const core::address& b, std::uint16_t pb) {
  auto wildcard = [](const core::address& x) {
    return x.family() == core::family::v4 ? x.v4() == 0 : (x.v6_high() == 0 && x.v6_low() == 0);
  };
  return pa == pb && pa != 0 && (a == b || wildcard(a) || wildcard(b));
}

limits_config read_limits(const yaml_node& n) {
  n.expect_keys({"max_header_bytes", "max_request_body", "header_timeout", "body_timeout",
                 "keepalive_timeout", "max_connections", "max_connections_per_address",
                 "max_connections_per_network", "min_body_rate", "max_concurrent_streams"});
  limits_config l;
  if (auto v = n.get("max_header_bytes")) {
    l.max_header_bytes = v->as_size();
    if (l.max_header_bytes < 1024 || l.max_header_bytes > (1u << 20)) {
      v->fail("must be from 1KiB to 1MiB");
    }
  }
  if (auto v = n.get("max_request_body")) l.max_request_body = v->as_size();
  if (auto v = n.get("header_timeout")) l.header_timeout = positive_duration(*v);
  if (auto v = n.get("body_timeout")) l.body_timeout = positive_duration(*v);
  if (auto v = n.get("keepalive_timeout")) l.keepalive_timeout = positive_duration(*v);
  if (auto v = n.get("max_connections")) {
    l.max_connections = static_cast<std::uint32_t>(v->as_uint(1, 1'000'000));
  }
  if (auto v = n.get("max_connections_per_address")) {
    l.max_connections_per_address = static_cast<std::uint32_t>(v->as_uint(1, 1'000'000));
  }
  if (auto v = n.get("max_connections_per_network")) {
    l.max_connections_per_network = static_cast<std::uint32_t>(v->as_uint(1, 1'000'000));
  }
  if (auto v = n.get("min_body_rate")) l.min_body_rate = v->as_size();
  if (auto v = n.get("max_concurrent_streams")) {
    l.max_concurrent_streams = static_cast<std::uint32_t>(v->as_uint(1, 1000));
  }
  return l;
}

/// An upstream's `tls` (docs/design.md §17).
upstream_tls_config read_upstream_tls(const yaml_node& n, const std::string& file) {
  n.expect_keys({"ca", "server_name", "certificate", "private_key", "verify"});
  upstream_tls_config t;
  if (auto v = n.get("ca")) {
    t.ca = readable_file(*v, file);
    t.ca_line = v->line();
  }
  if (auto v = n.get("server_name")) {
    t.server_name = v->as_string();
    if (!valid_dns_name(t.server_name) || core::address::parse(t.server_name)) {
      v->fail("invalid server name '" + t.server_name + "' (expected a DNS name)");
    }
  }
  const auto cert = n.get("certificate");
  const auto key = n.get("private_key");
  if (cert.has_value() != key.has_value()) n.fail("certificate and private_key go together");
  if (cert) {
    t.certificate = readable_file(*cert, file);
    t.certificate_line = cert->line();
    t.private_key = readable_file(*key, file);
    t.private_key_line = key->line();
  }
  if (auto v = n.get("verify")) t.verify = v->as_bool();
  return t;
}

upstream_config read_upstream(const std::string& name, const yaml_node& n,
                              const std::string& file) {
  n.expect_keys({"endpoints", "connect_timeout", "response_timeout", "idle_timeout",
                 "max_idle_connections", "max_failures", "ejection_time", "tls"});
  upstream_config u;
  u.name = name;
  const yaml_node endpoints = n.at("endpoints");
  for (const yaml_node& e : endpoints.items())
    u.endpoints.push_back(read_endpoint(e));
  if (u.endpoints.empty()) endpoints.fail("at least one endpoint is needed");
  if (auto v = n.get("connect_timeout")) u.connect_timeout = positive_duration(*v);
  if (auto v = n.get("response_timeout")) u.response_timeout = positive_duration(*v);
  if (auto v = n.get("idle_timeout")) u.idle_timeout = positive_duration(*v);
  if (auto v = n.get("max_idle_connections")) {
    u.max_idle_connections = static_cast<std::uint32_t>(v->as_uint(0, 100'000));
  }
  if (auto v = n.get("max_failures"))
    u.max_failures = static_cast<std::uint32_t>(v->as_uint(1, 1000));
  if (auto v = n.get("ejection_time")) u.ejection_time = positive_duration(*v);
  if (auto v = n.get("tls")) u.tls = read_upstream_tls(*v, file);
  return u;
}

/// Larger page templates are refused: a page is sent with every browser's 428.
constexpr std::size_t max_page_bytes = 256 * 1024;

pow_page_config read_page(const yaml_node& n, const std::string& file) {
  n.expect_keys({"template", "title", "text"});
  pow_page_config p;
  p.file = file;
  if (auto v = n.get("template")) {
    p.template_path = readable_file(*v, file);
    p.line = v->line();
    try {
      p.template_text = read_text_file(p.template_path);
    } catch (const error& e) {
      v->fail(e.problem() + " ('" + p.template_path + "')");
    }
    if (p.template_text.size() > max_page_bytes) {
      v->fail("template '" + p.template_path + "' is larger than 256KiB");
    }
  }
  if (auto v = n.get("title")) p.title = v->as_string();
  if (auto v = n.get("text")) p.text = v->as_string();
  return p;
}

pow_settings read_pow(const yaml_node& n, const std::string& file) {
  n.expect_keys({"secret_env", "challenge_ttl", "replay_cache_entries", "solver_hash_rate", "page",
                 "clearance"});
  pow_settings p;
  if (auto v = n.get("clearance")) {
    if (!v->is_map()) {
      const std::string w = v->as_string();
      if (w != "off" && w != "false") v->fail("expected off, or { base: 10m, max: 24h }");
      p.clearance.on = false;
    } else {
      v->expect_keys({"base", "max"});
      if (auto b = v->get("base")) p.clearance.base = positive_duration(*b);
      if (auto m = v->get("max")) p.clearance.max = positive_duration(*m);
      if (p.clearance.max < p.clearance.base) v->fail("max is shorter than base");
      if (p.clearance.max > std::chrono::hours(24 * 30)) v->at("max").fail("at most 720h");
    }
  }
  p.page.file = file;
  if (auto v = n.get("page")) p.page = read_page(*v, file);
  if (auto v = n.get("secret_env")) {
    p.secret_env = v->as_string();
    if (p.secret_env.empty() || !std::all_of(p.secret_env.begin(), p.secret_env.end(), [](char c) {
          return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
        })) {
      v->fail("invalid environment variable name '" + p.secret_env + "'");
    }
  }
  if (auto v = n.get("challenge_ttl")) p.challenge_ttl = positive_duration(*v);
  if (auto v = n.get("replay_cache_entries")) {
    p.replay_cache_entries = static_cast<std::uint32_t>(v->as_uint(1, 100'000'000));
  }
  if (auto v = n.get("solver_hash_rate")) p.solver_hash_rate = v->as_uint(1, 1'000'000'000'000);
  return p;
}

/// An environment variable's name (upper case, digits, underscores).
void check_env_name(const yaml_node& n, const std::string& name) {
  if (name.empty() || !std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
      })) {
    n.fail("invalid environment variable name '" + name + "'");
  }
}

store_config read_store(const yaml_node& n, const std::string& file) {
  n.expect_keys({"type", "address", "addresses", "username", "password_env", "tls", "key_prefix",
                 "timeout", "connect_timeout", "fail_mode", "capacity", "state_file",
                 "save_interval"});
  store_config s;
  const yaml_node type = n.at("type");
  const std::string t = type.as_string();
  if (t == "memory") {
    s.type = store_config::kind::memory;
    if (auto v = n.get("state_file")) {
      if (v->as_string().empty()) v->fail("expected a file name");
      s.state_file = resolve(file, v->as_string());
    }
    if (auto v = n.get("save_interval")) {
      s.save_interval = positive_duration(*v);
      if (s.save_interval < std::chrono::seconds(1)) v->fail("at least 1s");
    }
  } else if (t == "redis") {
    for (const char* key : {"state_file", "save_interval"}) {
      if (auto v = n.get(key)) {
        v->fail(std::string(key) +
                " is for store: memory; with redis a client's standing is kept in Redis");
      }
    }
    s.type = store_config::kind::redis;
    const auto one = n.get("address");
    const auto seeds = n.get("addresses");
    if (one && seeds)
      seeds->fail("give address (one server) or addresses (Cluster seeds), not both");
    if (one) {
      s.redis.push_back(read_endpoint(*one));
    } else if (seeds) {
      s.cluster = true;
      for (const auto& e : seeds->items())
        s.redis.push_back(read_endpoint(e));
      if (s.redis.empty()) seeds->fail("expected at least one seed node");
    } else {
      n.at("address");  // names the missing key
    }
    if (auto v = n.get("username")) s.username = v->as_string();
    if (auto v = n.get("password_env")) {
      s.password_env = v->as_string();
      check_env_name(*v, s.password_env);
    }
    if (auto v = n.get("tls")) {
      v->expect_keys({"ca", "certificate", "private_key", "server_name"});
      redis_tls_config tls;
      tls.ca = resolve(file, v->at("ca").as_string());
      if (auto c = v->get("certificate")) tls.certificate = resolve(file, c->as_string());
      if (auto k = v->get("private_key")) tls.private_key = resolve(file, k->as_string());
      if (tls.certificate.empty() != tls.private_key.empty()) {
        v->fail("certificate and private_key go together");
      }
      if (auto h = v->get("server_name")) tls.server_name = h->as_string();
      s.tls = tls;
    }
    if (auto v = n.get("key_prefix")) {
      s.key_prefix = v->as_string();
      // Braces would move the Cluster hash tag; spaces and controls make keys hard to read.
      for (const char c : s.key_prefix) {
        if (c == '{' || c == '}' || static_cast<unsigned char>(c) <= ' ' || c == 0x7f) {
          v->fail("key_prefix may not hold braces, spaces or control characters");
        }
      }
      if (s.key_prefix.size() > 64) v->fail("key_prefix is longer than 64 bytes");
    }
    if (auto v = n.get("connect_timeout")) s.connect_timeout = positive_duration(*v);
  } else {
    type.fail("expected memory or redis, got '" + t + "'");
  }
  if (auto v = n.get("timeout")) s.timeout = positive_duration(*v);
  if (auto v = n.get("fail_mode")) {
    const std::string m = v->as_string();
    if (m == "local") {
      s.fail_mode = store_config::failure::local;
    } else if (m == "open") {
      s.fail_mode = store_config::failure::open;
    } else if (m == "closed") {
      s.fail_mode = store_config::failure::closed;
    } else {
      v->fail("expected local, open or closed, got '" + m + "'");
    }
  }
  if (auto c = n.get("capacity")) {
    c->expect_keys({"ipv4_individual", "ipv4_network", "ipv6_subnet", "ipv6_provider", "keyed"});
    const char* names[5] = {"ipv4_individual", "ipv4_network", "ipv6_subnet", "ipv6_provider",
                            "keyed"};
    for (int i = 0; i < 5; ++i) {
      if (auto v = c->get(names[i])) s.capacity[i] = v->as_uint(1, 1'000'000'000);
    }
  }
  return s;
}

logging_config read_logging(const yaml_node& n, const std::string& file) {
  n.expect_keys({"level", "format", "access_log"});
  logging_config l;
  if (auto v = n.get("level")) {
    l.level = v->as_string();
    const auto levels = {"trace", "debug", "info", "warn", "error", "off"};
    if (std::find(levels.begin(), levels.end(), l.level) == levels.end()) {
      v->fail("expected trace, debug, info, warn, error or off, got '" + l.level + "'");
    }
  }
  if (auto v = n.get("format")) {
    const std::string f = v->as_string();
    if (f == "text") {
      l.format = logging_config::log_format::text;
    } else if (f == "json") {
      l.format = logging_config::log_format::json;
    } else {
      v->fail("expected text or json, got '" + f + "'");
    }
  }
  if (auto v = n.get("access_log")) {
    const std::string d = v->as_string();
    using destination = logging_config::destination;
    // YAML's spellings of a boolean, then the standard output by name.
    if (d == "false" || d == "no" || d == "off") {
      l.access_log = destination::off;
    } else if (d == "true" || d == "yes" || d == "on" || d == "stdout" || d == "-") {
      l.access_log = destination::standard_output;
    } else if (d.empty()) {
      v->fail("expected false, true, stdout or a file path");
    } else {
      l.access_log = destination::file;
      l.access_log_path = resolve(file, d);
    }
  }
  return l;
}

/// A list of CIDRs (trusted_proxies, access.allow, access.deny).
std::vector<core::cidr> read_cidrs(const yaml_node& n) {
  std::vector<core::cidr> out;
  for (const yaml_node& item : n.items()) {
    const std::string s = item.as_string();
    const auto c = core::cidr::parse(s);
    if (!c) item.fail("invalid CIDR '" + s + "' (expected e.g. 10.0.0.0/8 or 2001:db8::/32)");
    out.push_back(*c);
  }
  return out;
}

access_config read_access(const yaml_node& n) {
  n.expect_keys({"allow", "deny"});
  access_config a;
  if (auto v = n.get("allow")) a.allow = read_cidrs(*v);
  if (auto v = n.get("deny")) a.deny = read_cidrs(*v);
  return a;
}

/// A string or a list of strings, as a list.
std::vector<std::string> string_list(const yaml_node& n) {
  std::vector<std::string> out;
  if (!n.is_sequence()) {
    out.push_back(n.as_string());
  } else {
    for (const yaml_node& i : n.items())
      out.push_back(i.as_string());
  }
  for (const std::string& s : out) {
    if (s.empty()) n.fail("an empty string");
  }
  return out;
}

/// `identity.jwt` (docs/design.md §15).
jwt_config read_jwt(const yaml_node& n, const std::string& file) {
  n.expect_keys({"from", "jwks_file", "jwks_url", "jwks_refresh", "secret_env", "issuer",
                 "audience", "algorithms", "leeway", "on_invalid", "cache_entries"});
  jwt_config j;
  j.line = n.key_line();
  if (auto f = n.get("from")) {
    f->expect_keys({"header", "cookie"});
    const auto h = f->get("header");
    const auto c = f->get("cookie");
    if (h.has_value() == c.has_value()) f->fail("give either header or cookie");
    j.from.cookie = c.has_value();
    j.from.name = (h ? *h : *c).as_string();
    if (j.from.name.empty() || j.from.name.size() > 128 ||
        !std::all_of(j.from.name.begin(), j.from.name.end(), [](char ch) {
          return ch > 32 && ch < 127 && ch != ':' && ch != ';' && ch != '=' && ch != ',';
        })) {
      (h ? *h : *c).fail("invalid name '" + j.from.name + "'");
    }
  }
  if (auto v = n.get("jwks_file")) {
    j.jwks_file = readable_file(*v, file);
    j.jwks_file_line = v->line();
    std::ifstream in(j.jwks_file, std::ios::binary);
    j.jwks.assign(std::istreambuf_iterator<char>(in), {});
  }
  if (auto v = n.get("jwks_url")) {
    j.jwks_url = v->as_string();
    if (j.jwks_url.rfind("http://", 0) != 0 && j.jwks_url.rfind("https://", 0) != 0) {
      v->fail("jwks_url must start with http:// or https://");
    }
  }
  if (auto v = n.get("jwks_refresh")) j.jwks_refresh = positive_duration(*v);
  if (auto v = n.get("secret_env")) {
    j.secret_env = v->as_string();
    check_env_name(*v, j.secret_env);
  }
  if (auto v = n.get("issuer")) j.issuer = v->as_string();
  if (auto v = n.get("audience")) j.audience = string_list(*v);
  if (auto v = n.get("leeway")) j.leeway = v->as_duration();
  if (auto v = n.get("cache_entries")) {
    j.cache_entries = static_cast<std::uint32_t>(v->as_uint(0, 10'000'000));
  }
  if (auto v = n.get("on_invalid")) {
    const std::string o = v->as_string();
    if (o != "reject" && o != "anonymous") v->fail("expected reject or anonymous, not '" + o + "'");
    j.reject_invalid = o == "reject";
  }
  const yaml_node algs = n.at("algorithms");
  static constexpr std::string_view known[] = {"RS256", "RS384", "RS512", "PS256", "PS384",
                                               "PS512", "ES256", "ES384", "ES512", "EdDSA",
                                               "HS256", "HS384", "HS512"};
  bool asymmetric = false;
  for (const yaml_node& a : algs.items()) {
    const std::string name = a.as_string();
    if (name == "none" || name == "None" || name == "NONE") a.fail("\"none\" is never allowed");
    if (std::find(std::begin(known), std::end(known), name) == std::end(known)) {
      a.fail("unknown algorithm '" + name +
             "' (RS256/384/512, PS256/384/512, ES256/384/512, "
             "EdDSA, HS256/384/512)");
    }
    if (name[0] == 'H' && j.secret_env.empty()) {
      a.fail(name + " needs secret_env: HMAC tokens are verified only with a secret");
    }
    asymmetric |= name[0] != 'H';
    j.algorithms.push_back(name);
  }
  if (j.algorithms.empty()) algs.fail("list at least one algorithm");
  if (asymmetric && j.jwks_file.empty() && j.jwks_url.empty()) {
    algs.fail("an asymmetric algorithm needs jwks_file or jwks_url");
  }
  if (!j.jwks_file.empty() && !j.jwks_url.empty()) {
    n.fail("give jwks_file or jwks_url, not both");
  }
  return j;
}

identity_config read_identity(const yaml_node& n, const std::string& file) {
  n.expect_keys({"jwt"});
  identity_config i;
  if (auto j = n.get("jwt")) i.jwt = read_jwt(*j, file);
  return i;
}

shutdown_config read_shutdown(const yaml_node& n) {
  n.expect_keys({"delay", "drain_timeout"});
  shutdown_config s;
  if (auto v = n.get("delay")) {
    s.delay = v->as_duration();
    if (s.delay > std::chrono::hours(1)) v->fail("must be at most 1h");
  }
  if (auto v = n.get("drain_timeout")) {
    s.drain_timeout = v->as_duration();
    if (s.drain_timeout > std::chrono::hours(1)) v->fail("must be at most 1h");
  }
  return s;
}

void read_listeners(const yaml_node& root, gateway_config& g) {
  const yaml_node listeners = root.at("listeners");
  for (const yaml_node& n : listeners.items()) {
    listener_config l = read_listener(n, g.file);
    for (const auto& other : g.listeners) {
      if (other.name == l.name) n.at("name").fail("listener name '" + l.name + "' used twice");
      if (collides(other.address, other.port, l.address, l.port)) {
        n.at("port").fail("port " + std::to_string(l.port) + " already used by listener '" +
                          other.name + "'");
      }
    }
    g.listeners.push_back(std::move(l));
  }
  if (g.listeners.empty()) listeners.fail("at least one listener is needed");
  // http-01 is answered on plain listeners (docs/design.md §17): one must exist.
  const bool plain = std::any_of(g.listeners.begin(), g.listeners.end(),
                                 [](const listener_config& l) { return !l.tls; });
  const auto items = listeners.items();
  for (std::size_t i = 0; i < g.listeners.size(); ++i) {
    const auto& tls = g.listeners[i].tls;
    if (tls && tls->acme && tls->acme->challenge == acme_challenge::http_01 && !plain) {
      items[i].at("tls").at("acme").fail("http-01 needs a listener without tls (port 80)");
    }
  }
}

void read_admin(const yaml_node& root, gateway_config& g) {
  if (auto a = root.get("admin")) {
    a->expect_keys({"address", "port", "max_connections", "request_timeout"});
    if (auto v = a->get("address")) g.admin.address = read_address(*v);
    if (auto v = a->get("port")) g.admin.port = read_port(*v);
    if (auto v = a->get("max_connections")) {
      g.admin.max_connections = static_cast<std::uint32_t>(v->as_uint(1, 10'000));
    }
    if (auto v = a->get("request_timeout")) g.admin.request_timeout = positive_duration(*v);
  }
  for (const auto& l : g.listeners) {
    if (collides(l.address, l.port, g.admin.address, g.admin.port)) {
      const yaml_node where = root.get("admin") ? *root.get("admin") : root;
      where.fail("admin port " + std::to_string(g.admin.port) + " collides with listener '" +
                 l.name + "'");
    }
  }
}

std::uint32_t read_workers(const yaml_node& w) {
  const std::string s = w.as_string();
  if (s == "auto") return 0;
  const auto n = core::parse_uint(s, 256);
  if (!n || *n == 0) w.fail("expected auto or a whole number from 1 to 256, got '" + s + "'");
  return static_cast<std::uint32_t>(*n);
}

gateway_config read_gateway(const std::string& path) {
  const yaml_node root = load_yaml_file(path);
  if (root.is_null()) root.fail("the file is empty");
  root.expect_keys({"listeners", "admin", "workers", "limits", "trusted_proxies", "upstreams",
                    "routes", "default_route", "policies", "pow", "store", "logging", "access",
                    "shutdown", "identity", "hosts"});
  gateway_config g;
  g.file = path;

  // Policies first: routes are checked against their categories.
  const yaml_node policies = root.at("policies");
  for (const yaml_node& p : policies.items())
    g.policy_files.push_back(resolve(path, p.as_string()));
  if (g.policy_files.empty()) policies.fail("at least one policy file is needed");
  g.policy = load_policies(g.policy_files);

  read_listeners(root, g);
  read_admin(root, g);
  if (auto w = root.get("workers")) g.workers = read_workers(*w);
  if (auto l = root.get("limits")) g.limits = read_limits(*l);
  if (auto t = root.get("trusted_proxies")) g.trusted_proxies = read_cidrs(*t);
  for (const auto& [name, value] : root.at("upstreams").entries()) {
    if (!valid_name(name)) value.fail("invalid upstream name (use a-z, 0-9, _ and -)");
    g.upstreams.push_back(read_upstream(name, value, path));
  }
  read_routes(root, g);
  if (auto p = root.get("pow")) {
    g.pow = read_pow(*p, path);
  } else {
    g.pow.page.file = path;
  }
  if (auto s = root.get("store")) g.store = read_store(*s, path);
  if (auto l = root.get("logging")) g.logging = read_logging(*l, path);
  if (auto a = root.get("access")) g.access = read_access(*a);
  if (auto s = root.get("shutdown")) g.shutdown = read_shutdown(*s);
  if (auto i = root.get("identity")) g.identity = read_identity(*i, path);
  if (auto h = root.get("hosts")) read_hosts(*h, g);
  return g;
}

}  // namespace

const upstream_config* gateway_config::upstream(const std::string& name) const {
  for (const auto& u : upstreams) {
    if (u.name == name) return &u;
  }
  return nullptr;
}

std::vector<std::string> coverage_warnings(const gateway_config& g) {
  std::vector<std::string> out = coverage_warnings(g.policy);
  for (const host_config& h : g.hosts) {
    for (std::string& w : coverage_warnings(h.policy))
      out.push_back(std::move(w));
  }
  return out;
}

gateway_config load_gateway(const std::string& path) {
  // Anything yaml-cpp or the file system throws leaves as a config::error naming the file.
  return with_file_errors(path, [&] { return read_gateway(path); });
}

}  // namespace tollgate::config
