// The gateway through its real interfaces: a tollgate process in front of a tollgate-echo
// process, driven over loopback sockets.

#include <signal.h>
#include <catch2/catch.hpp>

#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include "harness.hpp"

using namespace tollgate::test;

namespace {

const std::string gateway_yaml = R"(
listeners: [{ name: public, address: 127.0.0.1, port: 0 }]
admin: { address: 127.0.0.1, port: 0 }
workers: 2
limits: { header_timeout: 2s, keepalive_timeout: 5s, max_request_body: 8MiB, max_header_bytes: 4KiB }
trusted_proxies: [127.0.0.1/32]
upstreams:
  app: { endpoints: ["{echo}"], response_timeout: 1s }
  dead: { endpoints: ["127.0.0.1:{dead}"], connect_timeout: 1s }
routes:
  - { match: { path_prefix: /strict }, category: strict, upstream: app }
  - { match: { path_prefix: /dead }, category: open, upstream: dead }
default_route: { category: open, upstream: app }
policies: ["{policy}"]
)";

const std::string policy_yaml = R"(
categories:
  open:
    limits:
      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }
  strict:
    limits:
      ipv4_individual: { short: { rate: 1/h, burst: 3 } }
      ipv4_network:    { short: { rate: 1/h, burst: 5 } }
)";

/// A loopback port with nothing listening on it.
std::uint16_t closed_port() {
  echo_server probe;  // take a port the kernel hands out, then free it
  const auto p = probe.port;
  return p;
}

std::string with_dead(std::string yaml, std::uint16_t dead) {
  yaml.replace(yaml.find("{dead}"), 6, std::to_string(dead));
  return yaml;
}

struct fixture {
  echo_server echo;
  std::uint16_t dead = closed_port();
  gateway gw{with_dead(gateway_yaml, dead), policy_yaml, echo.port};
};

}  // namespace

TEST_CASE("admitted requests are forwarded with forwarding headers and rate-limit headers",
          "[integration]") {
  fixture f;
  const auto r = request(f.gw.port, get("/api/profiles/x"));
  CHECK(r.status == 200);
  CHECK(r.body.find(R"(["X-Forwarded-For","127.0.0.1"])") != std::string::npos);
  CHECK(r.body.find(R"(["X-Real-IP","127.0.0.1"])") != std::string::npos);
  CHECK(r.body.find(R"(["X-Forwarded-Proto","http"])") != std::string::npos);
  CHECK(r.body.find(R"("target":"/api/profiles/x")") != std::string::npos);
  CHECK(r.header("x-ratelimit-limit") == "1000");
  CHECK(r.header("x-ratelimit-remaining") == "999");
  CHECK(r.header("x-ratelimit-level") == "ipv4_individual");
  CHECK(r.header("ratelimit-policy") == R"("ipv4_individual.short";q=1000;w=1)");
  CHECK(r.header("ratelimit") == R"("ipv4_individual.short";r=999;t=1)");
  CHECK(!r.header("x-ratelimit-reset").empty());
  CHECK(r.header("server") == "tollgate-echo");
}

TEST_CASE("hop-by-hop headers are not forwarded", "[integration]") {
  fixture f;
  const auto r = request(f.gw.port, get("/h",
                                        "Connection: keep-alive, X-Secret\r\nX-Secret: 1\r\n"
                                        "Keep-Alive: timeout=5\r\nTE: trailers\r\n"
                                        "Proxy-Connection: keep-alive\r\nUpgrade: foo\r\n"
                                        "X-Kept: yes\r\n"));
  CHECK(r.status == 200);
  for (const char* gone : {"X-Secret", "Keep-Alive", "\"TE\"", "Proxy-Connection", "Upgrade"}) {
    INFO(gone);
    CHECK(r.body.find(gone) == std::string::npos);
  }
  CHECK(r.body.find(R"(["X-Kept","yes"])") != std::string::npos);
}

TEST_CASE("a client's X-Forwarded-For is kept and the peer appended", "[integration]") {
  fixture f;
  // From an untrusted peer (127.0.0.2): the header is forwarded but not believed.
  auto r = request(f.gw.port, get("/x", "X-Forwarded-For: 203.0.113.9\r\n"), "127.0.0.2");
  CHECK(r.body.find(R"(["X-Forwarded-For","203.0.113.9, 127.0.0.2"])") != std::string::npos);
  CHECK(r.body.find(R"(["X-Real-IP","127.0.0.2"])") != std::string::npos);
  // From the trusted proxy (127.0.0.1): the client is the rightmost untrusted hop.
  r = request(f.gw.port, get("/x", "X-Forwarded-For: 198.51.100.1, 203.0.113.9\r\n"));
  CHECK(r.body.find(R"(["X-Real-IP","203.0.113.9"])") != std::string::npos);
}

TEST_CASE("limits are charged to the forwarded client behind a trusted proxy", "[integration]") {
  fixture f;
  auto from = [&](const char* client) {
    return request(f.gw.port, get("/strict", std::string("X-Forwarded-For: ") + client + "\r\n"));
  };
  for (int i = 0; i < 3; ++i)
    CHECK(from("203.0.113.9").status == 200);
  CHECK(from("203.0.113.9").status == 429);
  CHECK(from("198.51.100.20").status == 200);  // another client behind the same proxy
}

TEST_CASE("rejected requests get 429 with every header and never reach the upstream",
          "[integration]") {
  fixture f;
  const auto before = f.echo.requests();
  for (int i = 0; i < 3; ++i)
    CHECK(request(f.gw.port, get("/strict/a")).status == 200);
  for (int i = 0; i < 3; ++i) {
    const auto r = request(f.gw.port, get("/strict/a"));
    CHECK(r.status == 429);
    CHECK(r.header("retry-after") == "3600");
    CHECK(r.header("x-ratelimit-reason") == "burst_exhausted");
    CHECK(r.header("x-ratelimit-level") == "ipv4_individual");
    CHECK(r.header("x-ratelimit-remaining") == "0");
    CHECK(r.header("x-ratelimit-limit") == "3");
    CHECK(r.header("content-type") == "application/problem+json");
    CHECK(r.header("ratelimit-policy") ==
          R"("ipv4_individual.short";q=3;w=10800, "ipv4_network.short";q=5;w=18000)");
    CHECK(
        r.body ==
        R"x({"type":"about:blank","title":"Too Many Requests","status":429,"detail":"rate limit exceeded at ipv4_individual (short tier)","code":"rate_limit_exceeded","level":"ipv4_individual","tier":"short","retry_after":3600})x");
  }
  CHECK(f.echo.requests() - before == 3);
}

TEST_CASE("addresses of one /24 share its network limit", "[integration]") {
  fixture f;
  // Individual burst 3, network burst 5: two addresses of 127.0.0.0/24 get 5 between them.
  for (int i = 0; i < 3; ++i)
    CHECK(request(f.gw.port, get("/strict"), "127.0.0.2").status == 200);
  CHECK(request(f.gw.port, get("/strict"), "127.0.0.3").status == 200);
  CHECK(request(f.gw.port, get("/strict"), "127.0.0.3").status == 200);
  const auto r = request(f.gw.port, get("/strict"), "127.0.0.4");
  CHECK(r.status == 429);
  CHECK(r.header("x-ratelimit-level") == "ipv4_network");
  // Another /24 is untouched.
  CHECK(request(f.gw.port, get("/strict"), "127.0.1.2").status == 200);
}

TEST_CASE("keep-alive and pipelined requests are answered in order", "[integration]") {
  fixture f;
  const auto rs = exchange(f.gw.port, get("/strict/1") + get("/strict/2") + get("/strict/3"), 3);
  REQUIRE(rs.size() == 3);
  CHECK(rs[0].body.find(R"("target":"/strict/1")") != std::string::npos);
  CHECK(rs[1].body.find(R"("target":"/strict/2")") != std::string::npos);
  CHECK(rs[2].body.find(R"("target":"/strict/3")") != std::string::npos);
  // One limit, decided in order (1/h: no refill between them).
  CHECK(rs[0].header("x-ratelimit-remaining") == "2");
  CHECK(rs[1].header("x-ratelimit-remaining") == "1");
  CHECK(rs[2].header("x-ratelimit-remaining") == "0");
}

TEST_CASE("5 MB bodies arrive intact both ways, sized and chunked", "[integration]") {
  fixture f;
  std::string body(5'000'000, '\0');
  for (std::size_t i = 0; i < body.size(); ++i)
    body[i] = static_cast<char>((i * 7919) % 251);
  const std::string hash = fnv1a64_hex(body);

  auto r = request(f.gw.port, "POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: " +
                                  std::to_string(body.size()) + "\r\n\r\n" + body);
  CHECK(r.status == 200);
  CHECK(r.body.find(R"("body_bytes":5000000)") != std::string::npos);
  CHECK(r.body.find(hash) != std::string::npos);

  std::string chunked = "POST /upload HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (std::size_t at = 0; at < body.size(); at += 65536) {
    const auto piece = body.substr(at, 65536);
    char size[16];
    std::snprintf(size, sizeof size, "%zx\r\n", piece.size());
    chunked += size + piece + "\r\n";
  }
  chunked += "0\r\n\r\n";
  r = request(f.gw.port, chunked);
  CHECK(r.status == 200);
  CHECK(r.body.find(R"("body_bytes":5000000)") != std::string::npos);
  CHECK(r.body.find(hash) != std::string::npos);

  std::string expected(5'000'000, '\0');
  for (std::size_t i = 0; i < expected.size(); ++i)
    expected[i] = static_cast<char>('a' + i % 26);
  r = request(f.gw.port, get("/big?size=5000000"));
  CHECK(r.status == 200);
  CHECK(r.header("content-length") == "5000000");
  CHECK(r.body == expected);
  r = request(f.gw.port, get("/big?size=5000000&chunked=1"));
  CHECK(r.status == 200);
  CHECK(r.header("transfer-encoding") == "chunked");
  CHECK(r.body == expected);
}

TEST_CASE("HEAD keeps the length and HTTP/1.0 clients get bodies they can frame", "[integration]") {
  fixture f;
  auto r = request(f.gw.port, "HEAD /big?size=1000 HTTP/1.1\r\nHost: t\r\n\r\n");
  CHECK(r.status == 200);
  CHECK(r.header("content-length") == "1000");
  CHECK(r.body.empty());
  // The connection is still usable after a HEAD: the next response is read whole.
  const auto rs =
      exchange(f.gw.port, "HEAD /big?size=1000 HTTP/1.1\r\nHost: t\r\n\r\n" + get("/after"), 1);
  CHECK(rs[0].status == 200);

  // HTTP/1.0: a sized body keeps its length; an upstream's chunked body ends with the
  // connection instead, since a 1.0 client cannot read chunks.
  r = request(f.gw.port, "GET /big?size=3000 HTTP/1.0\r\n\r\n");
  CHECK(r.status == 200);
  CHECK(r.header("content-length") == "3000");
  CHECK(r.body.size() == 3000);
  r = request(f.gw.port, "GET /big?size=3000&chunked=1 HTTP/1.0\r\n\r\n");
  CHECK(r.status == 200);
  CHECK(r.header("transfer-encoding").empty());
  CHECK(r.header("content-length").empty());
  CHECK(r.body.size() == 3000);
  CHECK(!r.header("x-ratelimit-limit").empty());
}

TEST_CASE("bad input gets 400, 431 or 413 and the gateway keeps serving", "[integration]") {
  fixture f;
  CHECK(request(f.gw.port, "GARBAGE\r\n\r\n").status == 400);
  CHECK(request(f.gw.port, "GET relative HTTP/1.1\r\nHost: t\r\n\r\n").status == 400);
  CHECK(request(f.gw.port, "GET /../etc/passwd HTTP/1.1\r\nHost: t\r\n\r\n").status == 400);
  CHECK(request(f.gw.port, get("/x", "X-Big: " + std::string(5000, 'a') + "\r\n")).status == 431);
  CHECK(
      request(f.gw.port, "POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 9000000\r\n\r\n").status ==
      413);
  CHECK(
      request(
          f.gw.port,
          "POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n")
          .status == 400);
  CHECK(request(f.gw.port, get("/still-alive")).status == 200);
}

TEST_CASE("an unreachable upstream gives 502, a silent one 504, and the gateway keeps serving",
          "[integration]") {
  fixture f;
  auto r = request(f.gw.port, get("/dead/x"));
  CHECK(r.status == 502);
  CHECK(r.header("content-type") == "application/problem+json");
  CHECK(r.body.find(R"("status":502)") != std::string::npos);
  CHECK(!r.header("x-ratelimit-limit").empty());  // it went through the limit check

  const auto start = std::chrono::steady_clock::now();
  r = request(f.gw.port, get("/slow?delay_ms=4000"));
  const auto took = std::chrono::steady_clock::now() - start;
  INFO(r.body);
  CHECK(r.status == 504);
  CHECK(r.body.find(R"("status":504)") != std::string::npos);
  CHECK(took >= std::chrono::milliseconds(900));
  CHECK(took < std::chrono::milliseconds(3000));
  CHECK(request(f.gw.port, get("/fine")).status == 200);
}

TEST_CASE("the access log has one line per request when enabled", "[integration]") {
  echo_server echo;
  std::string yaml = with_dead(gateway_yaml, closed_port());
  yaml += "logging: { level: info, access_log: true }\n";
  gateway gw(yaml, policy_yaml, echo.port);
  CHECK(request(gw.port, get("/strict/a?x=1")).status == 200);
  for (int i = 0; i < 3; ++i)
    request(gw.port, get("/strict/a"));
  // Two workers log independently: collect the four lines, in whatever order they came.
  std::string lines;
  for (int i = 0; i < 4; ++i)
    lines += gw.process->wait_for_line("access ") + "\n";
  INFO(lines);
  CHECK(
      lines.find(
          R"(access 127.0.0.1 "GET /strict/a?x=1 HTTP/1.1" 200 category=strict decision=allowed)") !=
      std::string::npos);
  CHECK(lines.find(R"("GET /strict/a HTTP/1.1" 429 category=strict decision=limited)") !=
        std::string::npos);
}

TEST_CASE("a slow head and an idle keep-alive connection are closed on time", "[integration]") {
  echo_server echo;
  std::string yaml = with_dead(gateway_yaml, closed_port());
  const std::string before = "header_timeout: 2s, keepalive_timeout: 5s";
  yaml.replace(yaml.find(before), before.size(), "header_timeout: 1s, keepalive_timeout: 2s");
  gateway gw(yaml, policy_yaml, echo.port);
  // Slowloris: a head that never ends is cut at the header timeout (the watchdog checks at
  // least once a second, so allow one second more).
  auto took = time_until_closed(gw.port, "GET / HTTP/1.1\r\nHost: t\r\nX-Slow: 1\r\n",
                                std::chrono::seconds(5));
  CHECK(took >= std::chrono::milliseconds(900));
  CHECK(took <= std::chrono::milliseconds(2500));
  // A connection that asked for nothing at all is also bounded by the header timeout.
  took = time_until_closed(gw.port, "", std::chrono::seconds(5));
  CHECK(took >= std::chrono::milliseconds(900));
  CHECK(took <= std::chrono::milliseconds(2500));
  // After a complete exchange, an idle keep-alive connection lasts the keep-alive timeout.
  took = time_until_closed(gw.port, get("/x"), std::chrono::seconds(6));
  CHECK(took >= std::chrono::milliseconds(1900));
  CHECK(took <= std::chrono::milliseconds(3500));
  // And the gateway still serves.
  CHECK(request(gw.port, get("/after")).status == 200);
}

TEST_CASE("a real curl sees the rate-limit headers", "[integration]") {
  fixture f;
  const std::string cmd =
      "curl -si http://127.0.0.1:" + std::to_string(f.gw.port) + "/api/profiles/x";
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  char buf[4096];
  while (const auto n = fread(buf, 1, sizeof buf, p))
    out.append(buf, n);
  CHECK(pclose(p) == 0);
  CHECK(out.rfind("HTTP/1.1 200 OK", 0) == 0);
  CHECK(out.find("X-RateLimit-Limit: 1000") != std::string::npos);
  CHECK(out.find("RateLimit-Policy: ") != std::string::npos);
}

TEST_CASE("a broken reload keeps the running configuration", "[integration][reload]") {
  fixture f;
  for (int i = 0; i < 3; ++i)
    CHECK(request(f.gw.port, get("/strict")).status == 200);
  const auto line =
      f.gw.reload(with_dead(gateway_yaml, f.dead), "categories: { strict: { cost: [1] } }");
  CHECK(line.find("reload failed") != std::string::npos);
  CHECK(line.find("categories.strict.cost") != std::string::npos);
  CHECK(request(f.gw.port, get("/strict")).status == 429);  // old limits, old state
  CHECK(request(f.gw.port, get("/other")).status == 200);
}

TEST_CASE("a valid reload applies to new requests and keeps the state of kept limits",
          "[integration][reload]") {
  fixture f;
  for (int i = 0; i < 3; ++i)
    CHECK(request(f.gw.port, get("/strict")).status == 200);
  CHECK(request(f.gw.port, get("/strict")).status == 429);
  std::string bigger = policy_yaml;
  bigger.replace(bigger.find("burst: 3"), 8, "burst: 6");
  bigger.replace(bigger.find("burst: 5"), 8, "burst: 9");
  const auto line = f.gw.reload(with_dead(gateway_yaml, f.dead), bigger);
  CHECK(line.find("in force") != std::string::npos);
  // The 3 requests already made still count: 3 more fit under a burst of 6, not 6.
  for (int i = 0; i < 3; ++i)
    CHECK(request(f.gw.port, get("/strict"), "127.0.0.1").status == 200);
  const auto r = request(f.gw.port, get("/strict"));
  CHECK(r.status == 429);
  CHECK(r.header("x-ratelimit-limit") == "6");
}

TEST_CASE("tollgate --check-config reports the first error with file and line", "[integration]") {
  const auto dir =
      std::filesystem::temp_directory_path() / ("tollgate-cc-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "p.yaml") << "categories: { general: {} }\n";
  std::ofstream(dir / "g.yaml") << "listeners: [{ name: public, address: 127.0.0.1, port: 8080 }]\n"
                                   "upstreams: { app: { endpoints: ['127.0.0.1:1'] } }\n"
                                   "default_route: { category: general, upstream: nope }\n"
                                   "policies: [p.yaml]\n";
  child bad({built("tollgate"), "--check-config", (dir / "g.yaml").string()});
  const auto line = bad.wait_for_line("g.yaml");
  CHECK(bad.wait() == 1);
  CHECK(line == (dir / "g.yaml").string() + ":3: default_route.upstream: unknown upstream 'nope'");
  std::ofstream(dir / "g.yaml") << "listeners: [{ name: public, address: 127.0.0.1, port: 8080 }]\n"
                                   "upstreams: { app: { endpoints: ['127.0.0.1:1'] } }\n"
                                   "default_route: { category: general, upstream: app }\n"
                                   "policies: [p.yaml]\n";
  child good({built("tollgate"), "--check-config", (dir / "g.yaml").string()});
  CHECK(good.wait_for_line("ok").find("1 listeners") != std::string::npos);
  CHECK(good.wait() == 0);
  // A certificate that does not load.
  std::ofstream(dir / "cert.pem") << "x";
  std::ofstream(dir / "g.yaml") << "listeners: [{ name: public, address: 127.0.0.1, port: 8080, "
                                   "tls: { certificate: cert.pem, private_key: cert.pem } }]\n"
                                   "upstreams: { app: { endpoints: ['127.0.0.1:1'] } }\n"
                                   "default_route: { category: general, upstream: app }\n"
                                   "policies: [p.yaml]\n";
  child tls({built("tollgate"), "--check-config", (dir / "g.yaml").string()});
  CHECK(tls.wait_for_line("tls").find("g.yaml:1: listeners.public.tls.certificate: cannot load") !=
        std::string::npos);
  CHECK(tls.wait() == 1);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a PROXY protocol listener charges the client the header names", "[integration]") {
  echo_server echo;
  std::string yaml = gateway_yaml;
  yaml.replace(yaml.find("port: 0 }]"), 10, "port: 0, proxy_protocol: true }]");
  yaml.replace(yaml.find("trusted_proxies: [127.0.0.1/32]"), 31, "trusted_proxies: []");
  gateway gw(with_dead(yaml, closed_port()), policy_yaml, echo.port);

  const std::string v1 = "PROXY TCP4 203.0.113.7 127.0.0.1 40000 8080\r\n";
  auto r = request(gw.port, v1 + get("/x"));
  CHECK(r.status == 200);
  CHECK(r.body.find(R"(["X-Real-IP","203.0.113.7"])") != std::string::npos);
  CHECK(r.body.find(R"(["X-Forwarded-For","203.0.113.7"])") != std::string::npos);

  // v2, binary, with the request in the same segment; 198.51.100.9 in network byte order.
  std::string v2("\r\n\r\n\0\r\nQUIT\n\x21\x11\x00\x0c", 16);
  for (const int b : {198, 51, 100, 9, 127, 0, 0, 1, 0x9c, 0x40, 0x1f, 0x90})
    v2 += static_cast<char>(b);
  r = request(gw.port, v2 + get("/x"));
  CHECK(r.status == 200);
  CHECK(r.body.find(R"(["X-Real-IP","198.51.100.9"])") != std::string::npos);

  // The limits follow the named client, not the balancer's address.
  for (int i = 0; i < 3; ++i)
    CHECK(request(gw.port, v1 + get("/strict")).status == 200);
  CHECK(request(gw.port, v1 + get("/strict")).status == 429);
  CHECK(request(gw.port, "PROXY TCP4 203.0.113.8 127.0.0.1 1 2\r\n" + get("/strict")).status ==
        200);

  // LOCAL (the balancer's health check): the socket peer stands.
  const std::string local("\r\n\r\n\0\r\nQUIT\n\x20\x00\x00\x00", 16);
  r = request(gw.port, local + get("/x"));
  CHECK(r.body.find(R"(["X-Real-IP","127.0.0.1"])") != std::string::npos);

  // Without a header, or with a broken one, the connection is closed unanswered.
  CHECK_THROWS(request(gw.port, get("/x")));
  CHECK_THROWS(request(gw.port, "PROXY TCP4 nonsense\r\n" + get("/x")));
  CHECK(request(gw.port, v1 + get("/still-alive")).status == 200);
}

TEST_CASE("an upstream that closes without answering gives 502, interim responses are skipped",
          "[integration]") {
  scripted_upstream silent("");
  scripted_upstream hints(
      "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"
      "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nfinal");
  const std::string yaml = R"(
listeners: [{ name: public, address: 127.0.0.1, port: 0 }]
admin: { address: 127.0.0.1, port: 0 }
workers: 1
upstreams:
  silent: { endpoints: ["127.0.0.1:)" +
                           std::to_string(silent.port) + R"("] }
  hints: { endpoints: ["127.0.0.1:)" +
                           std::to_string(hints.port) + R"("] }
routes:
  - { match: { path_prefix: /hints }, category: open, upstream: hints }
default_route: { category: open, upstream: silent }
policies: ["{policy}"]
)";
  gateway gw(yaml, policy_yaml, 1);
  auto r = request(gw.port, get("/x"));
  CHECK(r.status == 502);
  CHECK(r.body.find("upstream silent failed") != std::string::npos);
  r = request(gw.port, get("/hints"));
  CHECK(r.status == 200);
  CHECK(r.body == "final");
  CHECK(r.header("link").empty());
}
