#include <catch2/catch.hpp>

#include <unistd.h>
#include <filesystem>
#include <fstream>

#include "gateway/config/error.hpp"
#include "gateway/config/gateway.hpp"

using namespace tollgate;
using namespace tollgate::config;

namespace {

namespace fs = std::filesystem;

/// A scratch folder with a small policy file, for gateway files written by the tests.
struct scratch {
  fs::path dir;
  scratch() {
    dir = fs::temp_directory_path() / ("tollgate-gw-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    std::ofstream(dir / "p.yaml") << "categories:\n  general: {}\n  auth: {}\n";
  }
  ~scratch() { fs::remove_all(dir); }
  std::string write(const std::string& text) const {
    const auto path = (dir / "g.yaml").string();
    std::ofstream(path) << text;
    return path;
  }
};

const std::string minimal =
    "listeners: [{ name: public, address: 0.0.0.0, port: 8080 }]\n"
    "upstreams: { app: { endpoints: ['127.0.0.1:9000'] } }\n"
    "default_route: { category: general, upstream: app }\n"
    "policies: [p.yaml]\n";

std::string error_of(const scratch& s, const std::string& text) {
  try {
    load_gateway(s.write(text));
  } catch (const error& e) {
    const std::string what = e.what();
    const std::string prefix = (s.dir / "g.yaml").string();
    return what.rfind(prefix, 0) == 0 ? "g.yaml" + what.substr(prefix.size()) : what;
  }
  return "";
}

}  // namespace

TEST_CASE("the default gateway file loads with the routes of design.md section 3", "[config]") {
  const auto g = load_gateway(std::string(TOLLGATE_SOURCE_DIR) + "/config/gateway.yaml");
  REQUIRE(g.listeners.size() == 1);
  CHECK(g.listeners[0].name == "public");
  CHECK(g.listeners[0].port == 8080);
  CHECK(g.admin.port == 9090);
  CHECK(g.admin.address.to_string() == "127.0.0.1");
  CHECK(g.workers == 0);
  // The text access log `tollgate simulate --log build/access.log` reads after scripts/run.sh.
  CHECK(g.logging.access_log == logging_config::destination::file);
  CHECK(g.logging.format == logging_config::log_format::text);
  CHECK(g.logging.access_log_path == std::string(TOLLGATE_SOURCE_DIR) + "/build/access.log");
  CHECK(g.limits.max_header_bytes == 16u * 1024);
  CHECK(g.limits.keepalive_timeout == std::chrono::seconds(60));
  REQUIRE(g.upstreams.size() == 1);
  CHECK(g.upstreams[0].endpoints[0] == endpoint_config{"127.0.0.1", 9000});
  REQUIRE(g.routes.size() == 8);
  CHECK(g.routes[0].method == "POST");
  CHECK(g.routes[0].kind == path_match::exact);
  CHECK(g.routes[0].path == "/api/auth/login");
  CHECK(g.routes[0].category == "auth");
  for (int i = 0; i < 3; ++i) {  // the auth routes match every spelling upstreams accept
    INFO(g.routes[i].path);
    CHECK(g.routes[i].category == "auth");
    CHECK(g.routes[i].options.ignore_trailing_slash);
    CHECK(g.routes[i].options.case_insensitive);
    CHECK(g.routes[i].options.ignore_path_parameters);
  }
  CHECK_FALSE(g.routes[3].options.any());
  CHECK(g.routes[3].kind == path_match::prefix);
  CHECK(g.routes[3].category == "federation");
  CHECK(g.routes[4].headers ==
        std::vector<std::pair<std::string, std::string>>{{"Upgrade", "websocket"}});
  for (int i = 4; i < 8; ++i) {  // every upgrade, however its path is spelled (issue 21)
    INFO(i);
    CHECK(g.routes[i].category == "websocket");
    CHECK(g.routes[i].headers ==
          std::vector<std::pair<std::string, std::string>>{{"Upgrade", "websocket"}});
  }
  CHECK(g.routes[7].kind == path_match::any);
  CHECK(g.routes[7].method == "GET");  // an upgrade is a GET: no other request picks its buckets
  CHECK(g.default_route.category == "general");
  CHECK(g.policy.category("auth") != nullptr);
  CHECK(g.policy_files[0] == std::string(TOLLGATE_SOURCE_DIR) + "/policies/default.yaml");
  CHECK(g.store.type == store_config::kind::memory);
  CHECK(g.logging.level == "info");
}

TEST_CASE("a minimal gateway file takes the documented defaults", "[config]") {
  scratch s;
  const auto g = load_gateway(s.write(minimal));
  CHECK(g.admin.port == 9090);
  CHECK(g.upstreams[0].connect_timeout == std::chrono::seconds(2));
  CHECK(g.upstreams[0].max_failures == 5u);
  CHECK(g.pow.secret_env == "TOLLGATE_POW_SECRET");
  CHECK(g.pow.challenge_ttl == std::chrono::seconds(60));
  CHECK(g.limits.max_request_body == 16u << 20);
  CHECK(g.routes.empty());
  CHECK(g.store.state_file.empty());
  CHECK(g.store.save_interval == std::chrono::seconds(30));
}

TEST_CASE("a state file is named relative to the gateway file", "[config]") {
  scratch s;
  const auto g = load_gateway(
      s.write(minimal + "store: { type: memory, state_file: state/s.bin, save_interval: 5s }\n"));
  CHECK(g.store.state_file == (s.dir / "state/s.bin").string());
  CHECK(g.store.save_interval == std::chrono::seconds(5));
}

TEST_CASE("gateway options parse", "[config]") {
  scratch s;
  const auto g = load_gateway(s.write(
      minimal +
      "workers: 3\n"
      "trusted_proxies: [10.0.0.0/8, '2001:db8::/32']\n"
      "routes:\n"
      "  - { match: { path_glob: '/api/files/**' }, category: auth, upstream: app }\n"
      "store: { type: redis, address: '[::1]:6379', timeout: 5ms, fail_mode: closed, capacity: "
      "{ keyed: 7 } }\n"
      "logging: { level: debug, access_log: true }\n"));
  CHECK(g.workers == 3u);
  REQUIRE(g.trusted_proxies.size() == 2);
  CHECK(g.trusted_proxies[1].to_string() == "2001:db8::/32");
  CHECK(g.routes[0].kind == path_match::glob);
  CHECK(g.routes[0].line == 8);
  CHECK(g.store.type == store_config::kind::redis);
  CHECK(g.store.redis == std::vector<endpoint_config>{{"::1", 6379}});
  CHECK_FALSE(g.store.cluster);
  CHECK(g.store.key_prefix == "tg:");
  CHECK(g.store.fail_mode == store_config::failure::closed);
  CHECK(g.store.capacity[4] == 7u);
  CHECK(g.logging.access_log == logging_config::destination::standard_output);
  CHECK(g.logging.format == logging_config::log_format::text);
  CHECK(g.access.allow.empty());
  CHECK(g.shutdown.delay == core::duration::zero());
}

TEST_CASE("logging, access lists and shutdown parse", "[config]") {
  scratch s;
  const auto g = load_gateway(s.write(
      minimal +
      "logging: { level: info, format: json, access_log: logs/access.log }\n"
      "access: { allow: [10.0.0.0/8, '2001:db8::/32'], deny: [192.0.2.0/24, 198.51.100.7] }\n"
      "shutdown: { delay: 5s, drain_timeout: 250ms }\n"));
  CHECK(g.logging.format == logging_config::log_format::json);
  CHECK(g.logging.access_log == logging_config::destination::file);
  CHECK(g.logging.access_log_path == (s.dir / "logs/access.log").string());
  REQUIRE(g.access.allow.size() == 2);
  CHECK(g.access.allow[1].to_string() == "2001:db8::/32");
  REQUIRE(g.access.deny.size() == 2);
  CHECK(g.access.deny[1].to_string() == "198.51.100.7/32");
  CHECK(g.shutdown.delay == std::chrono::seconds(5));
  CHECK(g.shutdown.drain_timeout == std::chrono::milliseconds(250));
  for (const char* spelling : {"stdout", "'-'", "true", "on"}) {
    INFO(spelling);
    const auto h = load_gateway(s.write(minimal + "logging: { access_log: " + spelling + " }\n"));
    CHECK(h.logging.access_log == logging_config::destination::standard_output);
    CHECK(h.logging.access_log_on());
  }
  for (const char* spelling : {"false", "off", "no"}) {
    INFO(spelling);
    const auto h = load_gateway(s.write(minimal + "logging: { access_log: " + spelling + " }\n"));
    CHECK_FALSE(h.logging.access_log_on());
  }
}

TEST_CASE("the browsers' page: title, text, a template read at load, its errors", "[config]") {
  scratch s;
  const auto defaults = load_gateway(s.write(minimal));
  CHECK(defaults.pow.page.template_path.empty());
  CHECK(defaults.pow.page.title == "Checking your browser");
  std::ofstream(s.dir / "page.html") << "<p>{{challenge}} {{difficulty}}</p>";
  const auto g = load_gateway(
      s.write(minimal + "pow:\n  page: { template: page.html, title: One moment, text: Hello }\n"));
  CHECK(g.pow.page.template_path == (s.dir / "page.html").string());
  CHECK(g.pow.page.template_text == "<p>{{challenge}} {{difficulty}}</p>");
  CHECK(g.pow.page.title == "One moment");
  CHECK(g.pow.page.text == "Hello");
  CHECK(g.pow.page.line == 6);
  CHECK(error_of(s, minimal + "pow:\n  page: { template: missing.html }\n") ==
        "g.yaml:6: pow.page.template: cannot read file '" + (s.dir / "missing.html").string() +
            "': No such file or directory");
  CHECK(error_of(s, minimal + "pow:\n  page: { colour: red }\n") ==
        "g.yaml:6: pow.page.colour: unknown key (expected template, title or text)");
  std::ofstream(s.dir / "big.html") << std::string(300 * 1024, 'x');
  CHECK(error_of(s, minimal + "pow:\n  page: { template: big.html }\n") ==
        "g.yaml:6: pow.page.template: template '" + (s.dir / "big.html").string() +
            "' is larger than 256KiB");
}

TEST_CASE("pow.clearance: on by default, its times, off, and its errors", "[config]") {
  scratch s;
  const auto defaults = load_gateway(s.write(minimal));
  CHECK(defaults.pow.clearance.on);
  CHECK(defaults.pow.clearance.base == std::chrono::minutes(10));
  CHECK(defaults.pow.clearance.max == std::chrono::hours(24));
  const auto g = load_gateway(s.write(minimal + "pow: { clearance: { base: 1m, max: 2h } }\n"));
  CHECK(g.pow.clearance.base == std::chrono::minutes(1));
  CHECK(g.pow.clearance.max == std::chrono::hours(2));
  CHECK_FALSE(load_gateway(s.write(minimal + "pow: { clearance: off }\n")).pow.clearance.on);
  CHECK(error_of(s, minimal + "pow: { clearance: sometimes }\n") ==
        "g.yaml:5: pow.clearance: expected off, or { base: 10m, max: 24h }");
  CHECK(error_of(s, minimal + "pow: { clearance: { base: 2h, max: 1h } }\n") ==
        "g.yaml:5: pow.clearance: max is shorter than base");
  CHECK(error_of(s, minimal + "pow: { clearance: { base: 1m, max: 1000h } }\n") ==
        "g.yaml:5: pow.clearance.max: at most 720h");
  CHECK(error_of(s, minimal + "pow: { clearance: { lifetime: 1m } }\n") ==
        "g.yaml:5: pow.clearance.lifetime: unknown key (expected base or max)");
}

TEST_CASE("route path options parse and default to off", "[config]") {
  scratch s;
  const auto g = load_gateway(s.write(
      minimal +
      "routes:\n"
      "  - { match: { path: /a, ignore_trailing_slash: true }, category: auth, upstream: app }\n"
      "  - { match: { path_prefix: /b, case_insensitive: true, ignore_trailing_slash: false }, "
      "category: auth, upstream: app }\n"
      "  - { match: { path_glob: '/c/*', ignore_path_parameters: true }, category: auth, "
      "upstream: app }\n"
      "  - { match: { path: /d }, category: auth, upstream: app }\n"));
  REQUIRE(g.routes.size() == 4);
  const auto& o = g.routes;
  CHECK((o[0].options.ignore_trailing_slash && !o[0].options.case_insensitive &&
         !o[0].options.ignore_path_parameters));
  CHECK((!o[1].options.ignore_trailing_slash && o[1].options.case_insensitive &&
         !o[1].options.ignore_path_parameters));
  CHECK((!o[2].options.ignore_trailing_slash && !o[2].options.case_insensitive &&
         o[2].options.ignore_path_parameters));
  CHECK_FALSE(o[3].options.any());
}

TEST_CASE("route path option errors name file, line and key", "[config]") {
  scratch s;
  const std::string route = minimal + "routes:\n  - { match: { ";
  const std::string target = " }, category: auth, upstream: app }\n";
  const std::pair<std::string, std::string> cases[] = {
      {route + "path: /a, case_insensitive: yes" + target,
       "g.yaml:6: routes[0].match.case_insensitive: expected true or false, got 'yes'"},
      {route + "path: /a, ignore_trailing_slash: [true]" + target,
       "g.yaml:6: routes[0].match.ignore_trailing_slash: expected a single value"},
      {route + "path: /a, ignore_path_parameters: 1" + target,
       "g.yaml:6: routes[0].match.ignore_path_parameters: expected true or false, got '1'"},
      {route + "method: POST, ignore_trailing_slash: true" + target,
       "g.yaml:6: routes[0].match.ignore_trailing_slash: needs one of path, path_prefix and "
       "path_glob"},
      {route + "path: '/a;v=1', ignore_path_parameters: true" + target,
       "g.yaml:6: routes[0].match.ignore_path_parameters: the path has a ';' parameter, which "
       "requests are compared without"},
      {route + "path: /a, trailing_slash: true" + target,
       "g.yaml:6: routes[0].match.trailing_slash: unknown key (expected method, path, "
       "path_prefix, path_glob, header, ignore_trailing_slash, case_insensitive or "
       "ignore_path_parameters)"},
      {minimal + "routes:\n  - match:\n      path_glob: /a/*\n      case_insensitive: maybe\n"
                 "    category: auth\n    upstream: app\n",
       "g.yaml:8: routes[0].match.case_insensitive: expected true or false, got 'maybe'"},
  };
  for (const auto& [yaml, message] : cases) {
    INFO(yaml);
    CHECK(error_of(s, yaml) == message);
  }
}

TEST_CASE("every gateway error names file, line and key", "[config]") {
  scratch s;
  struct bad {
    std::string yaml;
    std::string message;
  };
  const std::string up = "upstreams: { app: { endpoints: ['127.0.0.1:9000'] } }\n";
  const std::string dr =
      "default_route: { category: general, upstream: app }\npolicies: [p.yaml]\n";
  const std::string l = "listeners: [{ name: public, address: 0.0.0.0, port: 8080 }]\n";
  const bad cases[] = {
      {"", "g.yaml: the file is empty"},
      {minimal + "colour: red\n",
       "g.yaml:5: colour: unknown key (expected listeners, admin, workers, limits, "
       "trusted_proxies, "
       "upstreams, routes, default_route, policies, pow, store, logging, access, shutdown, "
       "identity or hosts)"},
      {l + up + "default_route: { category: general, upstream: app }\n",
       "g.yaml:1: policies: missing required key"},
      {l + up + "default_route: { category: general, upstream: app }\npolicies: []\n",
       "g.yaml:4: policies: at least one policy file is needed"},
      {l + up + "default_route: { category: general, upstream: app }\npolicies: [nope.yaml]\n",
       (s.dir / "nope.yaml").string() + ": cannot read file: No such file or directory"},
      {"listeners: []\n" + up + dr, "g.yaml:1: listeners: at least one listener is needed"},
      {"listeners: [{ name: public, address: 0.0.0.0, port: 70000 }]\n" + up + dr,
       "g.yaml:1: listeners[0].port: expected a whole number from 0 to 65535, got '70000'"},
      {"listeners: [{ name: public, address: localhost, port: 80 }]\n" + up + dr,
       "g.yaml:1: listeners[0].address: invalid address 'localhost' (expected an IPv4 or IPv6 "
       "address)"},
      {"listeners: [{ name: Public, address: 0.0.0.0, port: 80 }]\n" + up + dr,
       "g.yaml:1: listeners[0].name: invalid listener name (use a-z, 0-9, _ and -)"},
      {"listeners: [{ name: a, address: 0.0.0.0, port: 80 }, { name: a, address: 127.0.0.1, port: "
       "81 }]\n" +
           up + dr,
       "g.yaml:1: listeners[1].name: listener name 'a' used twice"},
      {"listeners: [{ name: a, address: 0.0.0.0, port: 80 }, { name: b, address: 127.0.0.1, port: "
       "80 }]\n" +
           up + dr,
       "g.yaml:1: listeners[1].port: port 80 already used by listener 'a'"},
      {"listeners: [{ name: a, address: 0.0.0.0, port: 80, tls: { certificate: no.pem, "
       "private_key: no.key } }]\n" +
           up + dr,
       "g.yaml:1: listeners[0].tls.certificate: cannot read file '" + (s.dir / "no.pem").string() +
           "': No such file or directory"},
      {"listeners: [{ name: a, address: 0.0.0.0, port: 80, tls: { certificate: ., "
       "private_key: no.key } }]\n" +
           up + dr,
       "g.yaml:1: listeners[0].tls.certificate: cannot read file '" + (s.dir / "").string() +
           "': it is a directory"},
      // Upstreams over TLS (docs/design.md §17).
      {l + "upstreams: { app: { endpoints: ['127.0.0.1:9000'], tls: { certificate: p.yaml } } }\n" +
           dr,
       "g.yaml:2: upstreams.app.tls: certificate and private_key go together"},
      {l + "upstreams: { app: { endpoints: ['127.0.0.1:9000'], tls: { server_name: 'a b' } } }\n" +
           dr,
       "g.yaml:2: upstreams.app.tls.server_name: invalid server name 'a b' (expected a DNS name)"},
      {l +
           "upstreams: { app: { endpoints: ['127.0.0.1:9000'], tls: { server_name: 10.0.0.1 } } "
           "}\n" +
           dr,
       "g.yaml:2: upstreams.app.tls.server_name: invalid server name '10.0.0.1' (expected a DNS "
       "name)"},
      {l + "upstreams: { app: { endpoints: ['127.0.0.1:9000'], tls: { ca: no.pem } } }\n" + dr,
       "g.yaml:2: upstreams.app.tls.ca: cannot read file '" + (s.dir / "no.pem").string() +
           "': No such file or directory"},
      {l + "upstreams: { app: { endpoints: ['127.0.0.1:9000'], tls: { verify: maybe } } }\n" + dr,
       "g.yaml:2: upstreams.app.tls.verify: expected true or false, got 'maybe'"},
      {l + "upstreams: { app: { endpoints: ['127.0.0.1:9000'], tls: { sni: a } } }\n" + dr,
       "g.yaml:2: upstreams.app.tls.sni: unknown key (expected ca, server_name, certificate, "
       "private_key or verify)"},
      // Client certificates (docs/design.md §17).
      {"listeners: [{ name: a, address: 0.0.0.0, port: 80, tls: { certificate: p.yaml, "
       "private_key: p.yaml, client_verify: required } }]\n" +
           up + dr,
       "g.yaml:1: listeners[0].tls.client_verify: client_verify needs client_ca"},
      {"listeners: [{ name: a, address: 0.0.0.0, port: 80, tls: { certificate: p.yaml, "
       "private_key: p.yaml, client_ca: p.yaml, client_verify: always } }]\n" +
           up + dr,
       "g.yaml:1: listeners[0].tls.client_verify: expected optional or required, not 'always'"},
      {"listeners: [{ name: a, address: 0.0.0.0, port: 80, tls: { certificate: p.yaml, "
       "private_key: p.yaml, client_ca: no.pem } }]\n" +
           up + dr,
       "g.yaml:1: listeners[0].tls.client_ca: cannot read file '" + (s.dir / "no.pem").string() +
           "': No such file or directory"},
      {"listeners: [{ name: a, address: 0.0.0.0, port: 80, tls: { certificate: p.yaml, "
       "private_key: p.yaml, client_cert_headers: { subject: X-Subject } } }]\n" +
           up + dr,
       "g.yaml:1: listeners[0].tls.client_cert_headers: client_cert_headers needs client_ca"},
      {"listeners: [{ name: a, address: 0.0.0.0, port: 80, tls: { certificate: p.yaml, "
       "private_key: p.yaml, client_ca: p.yaml, client_cert_headers: { issuer: X-Issuer } } }]\n" +
           up + dr,
       "g.yaml:1: listeners[0].tls.client_cert_headers.issuer: unknown key (expected subject, san "
       "or sha256)"},
      {"listeners: [{ name: a, address: 0.0.0.0, port: 80, tls: { certificate: p.yaml, "
       "private_key: p.yaml, client_ca: p.yaml, client_cert_headers: { san: 'X San' } } }]\n" +
           up + dr,
       "g.yaml:1: listeners[0].tls.client_cert_headers.san: invalid header name 'X San'"},
      {"listeners: [{ name: a, address: 0.0.0.0, port: 80, tls: { certificate: p.yaml, "
       "private_key: p.yaml, client_ca: p.yaml, client_cert_headers: { subject: X-Cert, "
       "sha256: x-cert } } }]\n" +
           up + dr,
       "g.yaml:1: listeners[0].tls.client_cert_headers.sha256: header 'x-cert' named twice"},
      {"listeners: [{ name: a, address: 0.0.0.0, port: 80, tls: { certificate: p.yaml, "
       "private_key: p.yaml, client_ca: p.yaml, client_cert_headers: { subject: X-Real-IP } } "
       "}]\n" +
           up + dr,
       "g.yaml:1: listeners[0].tls.client_cert_headers.subject: header 'X-Real-IP' is set by the "
       "gateway"},
      {"listeners: [{ name: a, address: 0.0.0.0, port: 80, tls: { certificate: p.yaml, "
       "private_key: p.yaml, client_ca: p.yaml, client_cert_headers: {} } }]\n" +
           up + dr,
       "g.yaml:1: listeners[0].tls.client_cert_headers: name at least one of subject, san, "
       "sha256"},
      {minimal + "admin: { port: 8080 }\n",
       "g.yaml:5: admin: admin port 8080 collides with listener 'public'"},
      {minimal + "workers: many\n",
       "g.yaml:5: workers: expected auto or a whole number from 1 to 256, got 'many'"},
      {minimal + "workers: 0\n",
       "g.yaml:5: workers: expected auto or a whole number from 1 to 256, got '0'"},
      {minimal + "limits: { max_header_bytes: 100 }\n",
       "g.yaml:5: limits.max_header_bytes: must be from 1KiB to 1MiB"},
      {minimal + "limits: { header_timeout: 0s }\n",
       "g.yaml:5: limits.header_timeout: must be longer than 0"},
      {minimal + "trusted_proxies: [10.0.0.1/8]\n",
       "g.yaml:5: trusted_proxies[0]: invalid CIDR '10.0.0.1/8' (expected e.g. 10.0.0.0/8 or "
       "2001:db8::/32)"},
      {l + "upstreams: { app: { endpoints: [] } }\n" + dr,
       "g.yaml:2: upstreams.app.endpoints: at least one endpoint is needed"},
      {l + "upstreams: { app: { endpoints: ['127.0.0.1'] } }\n" + dr,
       "g.yaml:2: upstreams.app.endpoints[0]: invalid endpoint '127.0.0.1' (expected host:port)"},
      {l + "upstreams: { app: { endpoints: ['h:99999'] } }\n" + dr,
       "g.yaml:2: upstreams.app.endpoints[0]: invalid endpoint 'h:99999' (expected host:port)"},
      {l + "upstreams: { app: { endpoints: ['[nope]:80'] } }\n" + dr,
       "g.yaml:2: upstreams.app.endpoints[0]: invalid endpoint '[nope]:80' (expected host:port)"},
      {l + "upstreams: { App: { endpoints: ['h:1'] } }\n" + dr,
       "g.yaml:2: upstreams.App: invalid upstream name (use a-z, 0-9, _ and -)"},
      {l + "upstreams: { app: { endpoints: ['h:1'], retries: 3 } }\n" + dr,
       "g.yaml:2: upstreams.app.retries: unknown key (expected endpoints, connect_timeout, "
       "response_timeout, idle_timeout, max_idle_connections, max_failures, ejection_time or tls)"},
      {minimal + "routes: [{ match: { path: /a }, category: nope, upstream: app }]\n",
       "g.yaml:5: routes[0].category: unknown category 'nope' (not defined in the policy files)"},
      {minimal + "routes: [{ match: { path: /a }, category: auth, upstream: db }]\n",
       "g.yaml:5: routes[0].upstream: unknown upstream 'db'"},
      {minimal +
           "routes: [{ match: { path: /a, path_prefix: /b }, category: auth, upstream: app }]\n",
       "g.yaml:5: routes[0].match.path_prefix: use only one of path, path_prefix and path_glob"},
      {minimal + "routes: [{ match: { path: a }, category: auth, upstream: app }]\n",
       "g.yaml:5: routes[0].match.path: must start with /"},
      {minimal + "routes: [{ match: { method: get }, category: auth, upstream: app }]\n",
       "g.yaml:5: routes[0].match.method: invalid method 'get' (expected an upper-case token such "
       "as GET)"},
      {minimal +
           "routes: [{ match: { header: { 'Up grade': x } }, category: auth, upstream: app }]\n",
       "g.yaml:5: routes[0].match.header.Up grade: invalid header name"},
      {minimal + "routes: [{ match: { path: /a } }]\n",
       "g.yaml:5: routes[0].category: missing required key"},
      {l + up + "policies: [p.yaml]\n", "g.yaml:1: default_route: missing required key"},
      {l + up + "default_route: { category: general }\npolicies: [p.yaml]\n",
       "g.yaml:3: default_route.upstream: missing required key"},
      {minimal + "pow: { secret_env: 'my secret' }\n",
       "g.yaml:5: pow.secret_env: invalid environment variable name 'my secret'"},
      {minimal + "store: { type: disk }\n",
       "g.yaml:5: store.type: expected memory or redis, got 'disk'"},
      {minimal + "store: { type: redis }\n", "g.yaml:5: store.address: missing required key"},
      {minimal + "store: { type: redis, address: 'a:1', addresses: ['b:2'] }\n",
       "g.yaml:5: store.addresses: give address (one server) or addresses (Cluster seeds), not "
       "both"},
      {minimal + "store: { type: redis, addresses: [] }\n",
       "g.yaml:5: store.addresses: expected at least one seed node"},
      {minimal + "store: { type: redis, address: 'a:1', key_prefix: 'x{y' }\n",
       "g.yaml:5: store.key_prefix: key_prefix may not hold braces, spaces or control characters"},
      {minimal + "store: { type: redis, address: 'a:1', password_env: 'lower' }\n",
       "g.yaml:5: store.password_env: invalid environment variable name 'lower'"},
      {minimal + "store: { type: redis, address: 'a:1', tls: { ca: c.pem, certificate: x.pem } }\n",
       "g.yaml:5: store.tls: certificate and private_key go together"},
      {minimal + "store: { type: redis, address: 'a:1', tls: { cert: x.pem } }\n",
       "g.yaml:5: store.tls.cert: unknown key (expected ca, certificate, private_key or "
       "server_name)"},
      {minimal + "store: { type: redis, address: 'a:1', state_file: s.bin }\n",
       "g.yaml:5: store.state_file: state_file is for store: memory; with redis a client's "
       "standing is kept in Redis"},
      {minimal + "store: { type: memory, state_file: s.bin, save_interval: 100ms }\n",
       "g.yaml:5: store.save_interval: at least 1s"},
      {minimal + "store: { type: memory, state_file: '' }\n",
       "g.yaml:5: store.state_file: expected a file name"},
      {minimal + "store: { type: memory, fail_mode: maybe }\n",
       "g.yaml:5: store.fail_mode: expected local, open or closed, got 'maybe'"},
      {minimal + "store: { type: memory, capacity: { ipv4_individual: 0 } }\n",
       "g.yaml:5: store.capacity.ipv4_individual: expected a whole number from 1 to 1000000000, "
       "got "
       "'0'"},
      {minimal + "logging: { level: loud }\n",
       "g.yaml:5: logging.level: expected trace, debug, info, warn, error or off, got 'loud'"},
      {minimal + "logging: { format: xml }\n",
       "g.yaml:5: logging.format: expected text or json, got 'xml'"},
      {minimal + "logging: { access_log: '' }\n",
       "g.yaml:5: logging.access_log: expected false, true, stdout or a file path"},
      {minimal + "access: { allow: [10.0.0.0/33] }\n",
       "g.yaml:5: access.allow[0]: invalid CIDR '10.0.0.0/33' (expected e.g. 10.0.0.0/8 or "
       "2001:db8::/32)"},
      {minimal + "access: { deny: [x], allow: [] }\n",
       "g.yaml:5: access.deny[0]: invalid CIDR 'x' (expected e.g. 10.0.0.0/8 or 2001:db8::/32)"},
      {minimal + "access: { block: [] }\n",
       "g.yaml:5: access.block: unknown key (expected allow or deny)"},
      {minimal + "shutdown: { delay: 2h }\n", "g.yaml:5: shutdown.delay: must be at most 1h"},
      {minimal + "shutdown: { drain: 1s }\n",
       "g.yaml:5: shutdown.drain: unknown key (expected delay or drain_timeout)"},
      {minimal + "identity: { jwt: { algorithms: [none], secret_env: S } }\n",
       "g.yaml:5: identity.jwt.algorithms[0]: \"none\" is never allowed"},
      {minimal + "identity: { jwt: { algorithms: [RS257], jwks_url: 'https://x/' } }\n",
       "g.yaml:5: identity.jwt.algorithms[0]: unknown algorithm 'RS257' (RS256/384/512, "
       "PS256/384/512, ES256/384/512, EdDSA, HS256/384/512)"},
      {minimal + "identity: { jwt: { algorithms: [HS256], jwks_url: 'https://x/' } }\n",
       "g.yaml:5: identity.jwt.algorithms[0]: HS256 needs secret_env: HMAC tokens are verified "
       "only with a secret"},
      {minimal + "identity: { jwt: { algorithms: [ES256], secret_env: S } }\n",
       "g.yaml:5: identity.jwt.algorithms: an asymmetric algorithm needs jwks_file or jwks_url"},
      {minimal + "identity: { jwt: { algorithms: [], secret_env: S } }\n",
       "g.yaml:5: identity.jwt.algorithms: list at least one algorithm"},
      {minimal + "identity: { jwt: { algorithms: [ES256], jwks_url: 'ftp://x/' } }\n",
       "g.yaml:5: identity.jwt.jwks_url: jwks_url must start with http:// or https://"},
      {minimal + "identity: { jwt: { algorithms: [ES256], jwks_file: nowhere.json } }\n",
       "g.yaml:5: identity.jwt.jwks_file: cannot read file '" + s.dir.string() +
           "/nowhere.json': No such "
           "file or directory"},
      {minimal + "identity: { jwt: { algorithms: [HS256], secret_env: lower } }\n",
       "g.yaml:5: identity.jwt.secret_env: invalid environment variable name 'lower'"},
      {minimal + "identity: { jwt: { algorithms: [HS256], secret_env: S, on_invalid: allow } }\n",
       "g.yaml:5: identity.jwt.on_invalid: expected reject or anonymous, not 'allow'"},
      {minimal + "identity: { jwt: { algorithms: [HS256], secret_env: S, from: { header: A, "
                 "cookie: b } } }\n",
       "g.yaml:5: identity.jwt.from: give either header or cookie"},
      {minimal + "identity: { jwt: { algorithms: [HS256], secret_env: S, issuer: x, iss: y } }\n",
       "g.yaml:5: identity.jwt.iss: unknown key (expected from, jwks_file, jwks_url, "
       "jwks_refresh, secret_env, issuer, audience, algorithms, leeway, on_invalid or "
       "cache_entries)"},
  };
  for (const bad& b : cases) {
    INFO(b.yaml);
    CHECK(error_of(s, b.yaml) == b.message);
  }
}

TEST_CASE("tls.acme parses, with or without certificates, and its errors", "[config]") {
  scratch s;
  const std::string rest =
      "upstreams: { app: { endpoints: ['127.0.0.1:9000'] } }\n"
      "default_route: { category: general, upstream: app }\npolicies: [p.yaml]\n";
  const std::string plain = "  - { name: web, address: 0.0.0.0, port: 80 }\n";
  auto tls = [&](const std::string& acme) {
    return "listeners:\n" + plain +
           "  - { name: a, address: 0.0.0.0, port: 443, tls: { acme: " + acme + " } }\n" + rest;
  };
  const std::string ok =
      "{ directory: 'https://acme.test/dir', email: ops@example.com, domains: [A.example.com, "
      "b.example.com], storage: acme, ca: p.yaml }";
  const auto g = load_gateway(s.write(tls(ok)));
  const auto& a = g.listeners[1].tls->acme;
  REQUIRE(a);
  CHECK(g.listeners[1].tls->certificates.empty());
  CHECK(a->directory == "https://acme.test/dir");
  CHECK(a->email == "ops@example.com");
  CHECK(a->domains == std::vector<std::string>{"a.example.com", "b.example.com"});
  CHECK(a->challenge == acme_challenge::http_01);
  CHECK(a->storage == (s.dir / "acme").string());
  CHECK(a->ca == (s.dir / "p.yaml").string());
  // Beside a static certificate, which is served until the first one is issued.
  const auto both = load_gateway(s.write(
      "listeners:\n" + plain +
      "  - { name: a, address: 0.0.0.0, port: 443, tls: { certificate: p.yaml, private_key: "
      "p.yaml, acme: { directory: 'https://x.test/', domains: [x.test], storage: st } } }\n" +
      rest));
  CHECK(both.listeners[1].tls->certificates.size() == 1);
  CHECK(both.listeners[1].tls->acme);
  // tls-alpn-01 is answered on the TLS listener itself: no plain listener needed.
  const auto alpn = load_gateway(
      s.write("listeners:\n  - { name: a, address: 0.0.0.0, port: 443, tls: { acme: { directory: "
              "'https://x.test/', domains: [x.test], challenge: tls-alpn-01, storage: st } } }\n" +
              rest));
  CHECK(alpn.listeners[0].tls->acme->challenge == acme_challenge::tls_alpn_01);

  struct bad {
    std::string yaml;
    std::string message;
  };
  const bad cases[] = {
      {tls("{ directory: 'http://acme.test/', domains: [a.test], storage: st }"),
       "g.yaml:3: listeners[1].tls.acme.directory: expected an https:// URL, not "
       "'http://acme.test/'"},
      {tls("{ directory: 'https://acme.test/', domains: [], storage: st }"),
       "g.yaml:3: listeners[1].tls.acme.domains: name at least one domain"},
      {tls("{ directory: 'https://acme.test/', domains: ['*.a.test'], storage: st }"),
       "g.yaml:3: listeners[1].tls.acme.domains[0]: invalid domain '*.a.test' (expected a DNS "
       "name, no wildcard)"},
      {tls("{ directory: 'https://acme.test/', domains: [a.test, A.test], storage: st }"),
       "g.yaml:3: listeners[1].tls.acme.domains[1]: domain 'a.test' named twice"},
      {tls("{ directory: 'https://acme.test/', domains: [a.test], storage: st, email: nobody }"),
       "g.yaml:3: listeners[1].tls.acme.email: invalid email address 'nobody'"},
      {tls("{ directory: 'https://acme.test/', domains: [a.test], storage: st, challenge: dns-01 "
           "}"),
       "g.yaml:3: listeners[1].tls.acme.challenge: expected http-01 or tls-alpn-01, not "
       "'dns-01'"},
      {tls("{ directory: 'https://acme.test/', domains: [a.test] }"),
       "g.yaml:3: listeners[1].tls.acme.storage: missing required key"},
      {tls("{ directory: 'https://acme.test/', domains: [a.test], storage: p.yaml }"),
       "g.yaml:3: listeners[1].tls.acme.storage: '" + (s.dir / "p.yaml").string() +
           "' is not a directory"},
      {tls("{ directory: 'https://acme.test/', domains: [a.test], storage: st, ca: no.pem }"),
       "g.yaml:3: listeners[1].tls.acme.ca: cannot read file '" + (s.dir / "no.pem").string() +
           "': No such file or directory"},
      {tls("{ directory: 'https://acme.test/', domains: [a.test], storage: st, key: ec }"),
       "g.yaml:3: listeners[1].tls.acme.key: unknown key (expected directory, email, domains, "
       "challenge, storage or ca)"},
      {"listeners:\n  - { name: a, address: 0.0.0.0, port: 443, tls: { acme: { directory: "
       "'https://acme.test/', domains: [a.test], storage: st } } }\n" +
           rest,
       "g.yaml:2: listeners[0].tls.acme: http-01 needs a listener without tls (port 80)"},
  };
  for (const auto& [yaml, message] : cases) {
    INFO(yaml);
    CHECK(error_of(s, yaml) == message);
  }
}
