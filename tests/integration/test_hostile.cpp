// Hostile clients and faulty upstreams, byte for byte through real sockets: each case here was
// a defect found by attacking the gateway (issue 8), and each asserts what must hold now.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "harness.hpp"
#include "raw_peer.hpp"

using namespace tollgate::test;
using namespace std::chrono_literals;

namespace {

/// `{fault}` in the YAML is the fault upstream's port.
std::string gateway_yaml(std::uint16_t fault_port, const std::string& limits) {
  std::string g = R"(
listeners: [{ name: public, address: 127.0.0.1, port: 0 }]
admin: { address: 127.0.0.1, port: 0 }
workers: 1
limits: { )" + limits +
                  R"( }
upstreams:
  app: { endpoints: ["{echo}"], response_timeout: 2s }
  fault: { endpoints: ["127.0.0.1:{fault}"], response_timeout: 2s, max_failures: 1000 }
routes:
  - { match: { path_prefix: /fault }, category: open, upstream: fault }
default_route: { category: open, upstream: app }
policies: ["{policy}"]
)";
  g.replace(g.find("{fault}"), 7, std::to_string(fault_port));
  return g;
}

const std::string policy_yaml = R"(
categories:
  open:
    limits:
      ipv4_individual: { short: { rate: 10000/s, burst: 10000 } }
)";

const std::string default_limits =
    "header_timeout: 2s, keepalive_timeout: 5s, body_timeout: 2s, max_header_bytes: 4KiB";

/// An upstream that answers every request on a connection with 200 and `body`.
void answer_each(int fd, const std::string& body) {
  std::string rest;
  while (!fault_upstream::read_head(fd, rest).empty()) {
    fault_upstream::write_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: " +
                                      std::to_string(body.size()) + "\r\n\r\n" + body);
  }
}

/// The value of a metric sample line starting with `prefix` (0 when absent).
double metric(const gateway& gw, const std::string& prefix) {
  const auto text = request(gw.admin_port, get("/metrics")).body;
  const auto at = text.find("\n" + prefix);
  if (at == std::string::npos) return 0;
  const auto space = text.find(' ', at + 1 + prefix.size());
  return std::stod(text.substr(space + 1));
}

/// Whether `done()` holds within five seconds.
template <class F>
bool eventually(F done) {
  for (int i = 0; i < 100; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

/// Whether the metric sample `prefix` reaches `value` within five seconds.
bool wait_for_metric(const gateway& gw, const std::string& prefix, double value) {
  return eventually([&] { return metric(gw, prefix) >= value; });
}

/// Whether the gateway has read all that `c` sent it: the gateway's end of the connection holds
/// no unread bytes (its receive queue in /proc/net/tcp). False while it has not accepted it.
bool read_by_gateway(const raw_client& c, std::uint16_t gateway_port) {
  sockaddr_in self{};
  socklen_t length = sizeof self;
  if (::getsockname(c.fd(), reinterpret_cast<sockaddr*>(&self), &length) != 0) return false;
  const unsigned long client_port = ntohs(self.sin_port);
  // "0100007F:1F90": the address and the port in hexadecimal; "00000000:00000000": the
  // send and receive queues.
  auto after_colon = [](const std::string& field) {
    return std::stoul(field.substr(field.find(':') + 1), nullptr, 16);
  };
  std::ifstream table("/proc/net/tcp");
  std::string line;
  std::getline(table, line);  // the column names
  while (std::getline(table, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state, queues;
    fields >> slot >> local >> remote >> state >> queues;
    if (after_colon(local) == gateway_port && after_colon(remote) == client_port)
      return after_colon(queues) == 0;
  }
  return false;
}

/// Whether the gateway still answers an ordinary request.
bool serving(const gateway& gw) {
  return request(gw.port, get("/still")).status == 200;
}

/// The answer of an upstream that refuses an upload before reading it: 413, and the end.
void refuse_upload(int fd) {
  const std::string body = R"({"error":"too large"})";
  fault_upstream::write_all(fd,
                            "HTTP/1.1 413 Content Too Large\r\nConnection: close\r\n"
                            "Content-Length: " +
                                std::to_string(body.size()) + "\r\n\r\n" + body);
}

/// Uploads 8 MiB to /fault/upload through the gateway on `port`, the body sent by another
/// thread while the answer is read: the answer, or status 0 when none came within 5 s.
raw_client::reply upload_answered_early(std::uint16_t port) {
  raw_client c(port);
  const std::size_t length = 8u << 20;
  c.send("POST /fault/upload HTTP/1.1\r\nHost: t\r\nContent-Length: " + std::to_string(length) +
         "\r\n\r\n");
  std::thread sender([&] {
    const std::string piece(64 * 1024, 'b');
    for (std::size_t sent = 0; sent < length && c.send(piece); sent += piece.size()) {
    }
  });
  auto r = c.read_response(5s);
  ::shutdown(c.fd(), SHUT_RDWR);  // stops the sender if the gateway is still reading
  sender.join();
  return r;
}

}  // namespace

TEST_CASE("chunk extensions and trailers without end get 400, not unbounded memory",
          "[integration][hostile]") {
  echo_server echo;
  fault_upstream unused([](int, int) {});
  gateway gw(gateway_yaml(unused.port, default_limits), policy_yaml, echo.port);
  const std::string head = "POST /x HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string mib(1 << 20, 'a');
  for (const std::string& opening :
       {std::string("1;x="), std::string("5\r\nhello\r\n0\r\nX-T: ")}) {
    INFO(opening);
    raw_client c(gw.port);
    c.send(head + opening);
    // A mebibyte in pieces: the gateway must give up after a few KiB, not buffer it all.
    for (int i = 0; i < 16 && c.send(std::string_view(mib).substr(0, mib.size() / 16)); ++i) {
    }
    const auto r = c.read_response();
    CHECK(r.status == 400);
    CHECK(r.body.find("chunk extensions or trailers too large") != std::string::npos);
    CHECK(c.closed_within(2s));
  }
  CHECK(serving(gw));
}

TEST_CASE("an upstream's endless chunk extension ends that exchange, not the gateway",
          "[integration][hostile]") {
  echo_server echo;
  std::atomic<std::size_t> taken{0};
  fault_upstream up([&](int fd, int) {
    std::string rest;
    fault_upstream::read_head(fd, rest);
    fault_upstream::write_all(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;x=");
    const std::string piece(64 * 1024, 'a');
    // Up to 16 MiB of one extension, for as long as the gateway takes it.
    for (int i = 0; i < 256 && fault_upstream::write_all(fd, piece); ++i)
      taken += piece.size();
  });
  gateway gw(gateway_yaml(up.port, default_limits), policy_yaml, echo.port);
  raw_client c(gw.port);
  c.send(get("/fault/x"));
  const auto asked = std::chrono::steady_clock::now();
  const auto r = c.read_response(5s);
  // The 200's head went on as it came; its body never completes: the gateway ends the
  // connection (status 0: no whole response), well before the client's own 5 s.
  CHECK(r.status == 0);
  CHECK(std::chrono::steady_clock::now() - asked < 4s);
  CHECK(c.closed_within(3s));
  // The gateway gave up after its bound (plus what the sockets' buffers hold), not 16 MiB.
  CHECK(taken < (8u << 20));
  CHECK(serving(gw));
}

TEST_CASE("an upstream's trailers pass within their bound, endless ones end that exchange",
          "[integration][hostile]") {
  echo_server echo;
  std::atomic<std::size_t> taken{0};
  std::atomic<bool> small_read{false};
  fault_upstream up([&](int fd, int n) {
    std::string rest;
    fault_upstream::read_head(fd, rest);
    fault_upstream::write_all(fd,
                              "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                              "5\r\nhello\r\n0\r\n");
    if (n == 0) {  // trailers of a few bytes, then the end
      fault_upstream::write_all(fd, "X-Checksum: abc\r\nX-Other: 1\r\n\r\n");
      // Closed only once the client has the response, so that the close is no part of it.
      eventually([&] { return small_read.load(); });
      return;
    }
    // One trailer field without end: up to 16 MiB, for as long as the gateway takes it.
    fault_upstream::write_all(fd, "X-Endless: ");
    const std::string piece(64 * 1024, 'a');
    for (int i = 0; i < 256 && fault_upstream::write_all(fd, piece); ++i)
      taken += piece.size();
  });
  gateway gw(gateway_yaml(up.port, default_limits), policy_yaml, echo.port);
  {
    raw_client c(gw.port);
    c.send(get("/fault/small"));
    const auto r = c.read_response(5s);
    CHECK(r.status == 200);
    CHECK(r.body == "hello");
    small_read = true;
  }
  raw_client c(gw.port);
  c.send(get("/fault/endless"));
  const auto asked = std::chrono::steady_clock::now();
  const auto r = c.read_response(5s);
  CHECK(r.status == 0);  // the head and "hello" went on; the end never comes
  CHECK(std::chrono::steady_clock::now() - asked < 4s);
  CHECK(c.closed_within(3s));
  // The gateway gave up after its bound (64 KiB for an upstream's, plus what the sockets'
  // buffers hold), not 16 MiB.
  CHECK(taken < (8u << 20));
  CHECK(serving(gw));
}

TEST_CASE("bytes an upstream sends after a response never answer another request",
          "[integration][hostile]") {
  echo_server echo;
  std::atomic<bool> answered{false};
  std::atomic<int> unasked_sent{0};
  fault_upstream up([&](int fd, int n) {
    std::string rest;
    if (fault_upstream::read_head(fd, rest).empty()) return;
    const std::string mine = "conn" + std::to_string(n);
    fault_upstream::write_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: " +
                                      std::to_string(mine.size()) + "\r\n\r\n" + mine);
    // A complete response once the client has the first, unasked: it must not reach the
    // next client.
    eventually([&] { return answered.load(); });
    fault_upstream::write_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nEVIL!");
    ++unasked_sent;
    answer_each(fd, mine);
  });
  gateway gw(gateway_yaml(up.port, default_limits), policy_yaml, echo.port);
  CHECK(request(gw.port, get("/fault/a")).body == "conn0");
  answered = true;
  // On loopback, written is arrived: the unasked response waits in the pooled connection.
  REQUIRE(eventually([&] { return unasked_sent == 1; }));
  const auto second = request(gw.port, get("/fault/b"), "127.0.0.2");
  CHECK(second.status == 200);
  CHECK(second.body == "conn1");  // a fresh connection, not the stale one's leftovers
  CHECK(up.connections() == 2);
}

TEST_CASE("an upstream that closes its idle connections costs no request",
          "[integration][hostile]") {
  // Every connection answers one request as if it were kept alive, then closes: the gateway
  // learns of the close while the connection waits in its pool (its read ahead ends) and does
  // not send the next request there. A POST, which is never retried, shows it: written to a
  // closed connection it would get 502.
  echo_server echo;
  fault_upstream up([&](int fd, int n) {
    std::string rest;
    if (fault_upstream::read_head(fd, rest).empty()) return;
    const std::string mine = "conn" + std::to_string(n);
    fault_upstream::write_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: " +
                                      std::to_string(mine.size()) + "\r\n\r\n" + mine);
  });
  gateway gw(gateway_yaml(up.port, default_limits), policy_yaml, echo.port);
  for (int i = 0; i < 5; ++i) {
    INFO(i);
    const auto r =
        request(gw.port, "POST /fault/pay HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi");
    CHECK(r.status == 200);
    CHECK(r.body == "conn" + std::to_string(i));  // each on a connection of its own
    // The upstream's close follows its answer by microseconds; the next request must come
    // after it (as any later client's would), or it races the close on any proxy. Without the
    // read ahead the pooled connection would be taken however long it waited.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

TEST_CASE("an early answer on a pooled connection reaches the client", "[integration][hostile]") {
  // The second request on a pooled connection is a large upload the upstream answers before
  // reading it, then closes: the answer arrives while the gateway is still writing the body,
  // and completes the connection's read ahead before anyone reads it.
  echo_server echo;
  fault_upstream up([](int fd, int) {
    std::string rest;
    if (fault_upstream::read_head(fd, rest).empty()) return;
    fault_upstream::write_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    if (fault_upstream::read_head(fd, rest).empty()) return;
    refuse_upload(fd);
  });
  gateway gw(gateway_yaml(up.port, default_limits), policy_yaml, echo.port);
  REQUIRE(request(gw.port, get("/fault/prime")).body == "ok");  // pools the connection
  const auto r = upload_answered_early(gw.port);
  CHECK(r.status == 413);
  CHECK(r.body == R"({"error":"too large"})");
  CHECK(up.connections() == 1);  // it was the pooled connection
  CHECK(serving(gw));
}

TEST_CASE("a non-idempotent request is never sent twice, an idempotent one is retried once",
          "[integration][hostile]") {
  echo_server echo;
  std::atomic<int> posts{0};
  std::atomic<int> gets{0};
  // Every connection answers its first request, then reads the next one and closes without a
  // word: a connection the upstream dropped after it received the request.
  fault_upstream up([&](int fd, int) {
    std::string rest;
    if (fault_upstream::read_head(fd, rest).empty()) return;
    fault_upstream::write_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    const std::string next = fault_upstream::read_head(fd, rest);
    if (next.rfind("POST", 0) == 0) ++posts;
    if (next.rfind("GET /fault/again", 0) == 0) ++gets;
  });
  gateway gw(gateway_yaml(up.port, default_limits), policy_yaml, echo.port);

  REQUIRE(request(gw.port, get("/fault/prime")).status == 200);  // pools a connection
  const auto post =
      request(gw.port, "POST /fault/pay HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n");
  // A retry would have gone to a fresh connection and been answered there (200): the 502 says
  // there was none; the upstream counts the one attempt it dropped.
  CHECK(post.status == 502);
  CHECK(eventually([&] { return posts == 1; }));

  REQUIRE(request(gw.port, get("/fault/prime")).status == 200);
  const auto again = request(gw.port, get("/fault/again"));
  CHECK(again.status == 200);  // retried on a fresh connection, which answers it
  CHECK(gets == 1);            // the dropped attempt; the fresh one answered it as a first
}

TEST_CASE("an unasked 101 or an unparseable answer is not retried", "[integration][hostile]") {
  echo_server echo;
  std::atomic<int> seen{0};
  fault_upstream up([&](int fd, int) {
    std::string rest;
    if (fault_upstream::read_head(fd, rest).empty()) return;
    fault_upstream::write_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    const std::string next = fault_upstream::read_head(fd, rest);
    if (next.empty()) return;
    ++seen;
    fault_upstream::write_all(fd, next.find("/fault/upgrade") != std::string::npos
                                      ? "HTTP/1.1 101 Switching Protocols\r\n\r\n"
                                      : "HTTP/1.1 2xx Nonsense\r\n\r\n");
  });
  gateway gw(gateway_yaml(up.port, default_limits), policy_yaml, echo.port);
  for (const char* target : {"/fault/upgrade", "/fault/garbage"}) {
    INFO(target);
    REQUIRE(request(gw.port, get("/fault/prime")).status == 200);
    const int before = seen;
    // As above: a retry would have been answered 200 by a fresh connection.
    CHECK(request(gw.port, get(target)).status == 502);
    CHECK(eventually([&] { return seen - before == 1; }));
  }
}

TEST_CASE("Transfer-Encoding not ending in chunked is 400 and the connection closes",
          "[integration][hostile]") {
  echo_server echo;
  fault_upstream unused([](int, int) {});
  gateway gw(gateway_yaml(unused.port, default_limits), policy_yaml, echo.port);
  const auto before = echo.requests();
  for (const char* te : {"chunked, identity", "gzip", "xchunked", "identity"}) {
    for (const bool with_length : {false, true}) {
      INFO(te << (with_length ? " with Content-Length" : ""));
      raw_client c(gw.port);
      c.send(std::string("POST /x HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: ") + te + "\r\n" +
             (with_length ? "Content-Length: 5\r\n" : "") + "\r\nhelloGET / HTTP/1.1\r\n\r\n");
      const auto r = c.read_response();
      CHECK(r.status == 400);
      CHECK(c.closed_within(2s));
    }
  }
  CHECK(echo.requests() == before);  // nothing reached the upstream
}

TEST_CASE("Host: missing on HTTP/1.1, repeated or invalid is 400, HTTP/1.0 gets one upstream",
          "[integration][hostile]") {
  echo_server echo;
  fault_upstream unused([](int, int) {});
  gateway gw(gateway_yaml(unused.port, default_limits), policy_yaml, echo.port);
  const auto before = echo.requests();
  for (const char* head :
       {"GET / HTTP/1.1\r\n\r\n", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: user@evil\r\n\r\n", "GET / HTTP/1.1\r\nHost: a:80:80\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: [::1\r\n\r\n"}) {
    INFO(head);
    raw_client c(gw.port);
    c.send(head);
    CHECK(c.read_response().status == 400);
    CHECK(c.closed_within(2s));
  }
  CHECK(echo.requests() == before);
  for (const char* host : {"example.com", "example.com:8080", "[::1]:80", "127.0.0.1", ""}) {
    INFO(host);
    CHECK(request(gw.port, std::string("GET / HTTP/1.1\r\nHost: ") + host + "\r\n\r\n").status ==
          200);
  }
  raw_client c(gw.port);
  c.send("GET /old HTTP/1.0\r\n\r\n");
  const auto r = c.read_response();
  CHECK(r.status == 200);
  CHECK(r.body.find("[\"Host\",\"127.0.0.1:" + std::to_string(echo.port) + "\"]") !=
        std::string::npos);
}

TEST_CASE("max_header_bytes is exact however the head arrives", "[integration][hostile]") {
  echo_server echo;
  fault_upstream unused([](int, int) {});
  gateway gw(gateway_yaml(unused.port, default_limits), policy_yaml, echo.port);
  // A head of exactly `size` bytes, with a long request line (Beast's own limit leaves the
  // request line out of its count).
  auto head_of = [](std::size_t size) {
    const std::string start = "GET /" + std::string(1500, 'p') + " HTTP/1.1\r\nHost: t\r\nX-Pad: ";
    return start + std::string(size - start.size() - 4, 'v') + "\r\n\r\n";
  };
  for (const std::size_t split :
       {std::size_t{0}, std::size_t{1}, std::size_t{700}, std::size_t{1530}, std::size_t{4000}}) {
    for (const std::size_t size : {std::size_t{4096}, std::size_t{4097}}) {
      INFO("head of " << size << " bytes, first write " << split);
      const std::string head = head_of(size);
      REQUIRE(head.size() == size);
      raw_client c(gw.port);
      if (split > 0) {
        c.send(head.substr(0, split));
        // Pacing, not a condition: the rest comes in a later read whenever the gateway wakes.
        std::this_thread::sleep_for(30ms);
      }
      c.send(head.substr(split));
      CHECK(c.read_response().status == (size <= 4096 ? 200 : 431));
    }
  }
}

TEST_CASE("an early answer from the upstream reaches the client while it is still sending",
          "[integration][hostile]") {
  echo_server echo;
  fault_upstream up([](int fd, int) {
    std::string rest;
    if (fault_upstream::read_head(fd, rest).empty()) return;
    refuse_upload(fd);  // and closes with the body unread: the kernel resets the connection
  });
  gateway gw(gateway_yaml(up.port, default_limits), policy_yaml, echo.port);
  const auto r = upload_answered_early(gw.port);
  CHECK(r.status == 413);
  CHECK(r.body == R"({"error":"too large"})");
}

TEST_CASE("a request body that trickles below min_body_rate is cut off", "[integration][hostile]") {
  echo_server echo;
  fault_upstream unused([](int, int) {});
  gateway gw(gateway_yaml(unused.port, "body_timeout: 1s, header_timeout: 2s, min_body_rate: 1KiB"),
             policy_yaml, echo.port);
  raw_client c(gw.port);
  c.send("POST /slow HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\n");
  const auto start = std::chrono::steady_clock::now();
  // 20 bytes every 200 ms: each read comes well within body_timeout, the rate far below.
  bool closed = false;
  for (int i = 0; i < 40 && !closed; ++i) {
    if (!c.send(std::string(20, 'x'))) break;
    closed = c.closed_within(200ms);
  }
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(closed);
  CHECK(took < 3s);
  CHECK(serving(gw));
}

TEST_CASE("one address holds its connection cap exactly over two workers, others are served",
          "[integration][hostile]") {
  echo_server echo;
  fault_upstream unused([](int, int) {});
  std::string yaml =
      gateway_yaml(unused.port, "header_timeout: 5s, max_connections_per_address: 5");
  yaml.replace(yaml.find("workers: 1"), 10, "workers: 2");
  gateway gw(yaml, policy_yaml, echo.port);
  // Twelve connections at once, accepted by both workers: exactly five are kept.
  std::vector<std::unique_ptr<raw_client>> conns;
  for (int i = 0; i < 12; ++i)
    conns.push_back(std::make_unique<raw_client>(gw.port, "127.0.0.9"));
  const std::string refused =
      "tollgate_connections_refused_total{listener=\"public\",reason=\"per_address\"}";
  REQUIRE(wait_for_metric(gw, refused, 7));
  int served = 0;
  for (auto& c : conns) {
    if (c->send(get("/held")) && c->read_response(2s).status == 200) ++served;
  }
  CHECK(served == 5);
  CHECK(metric(gw, refused) == 7);
  CHECK(request(gw.port, get("/other"), "127.0.0.10").status == 200);
  // A slot is given back however its connection ends.
  conns.clear();
  REQUIRE(eventually(
      [&] { return metric(gw, "tollgate_connections_active{listener=\"public\"}") == 0; }));
  std::vector<std::unique_ptr<raw_client>> again;
  for (int i = 0; i < 5; ++i) {
    again.push_back(std::make_unique<raw_client>(gw.port, "127.0.0.9"));
    again.back()->send(get("/back"));
  }
  for (auto& c : again)
    CHECK(c->read_response().status == 200);
  CHECK(metric(gw, refused) == 7);
}

TEST_CASE("the connection caps never count a trusted proxy, its clients are not reset",
          "[integration][hostile]") {
  echo_server echo;
  fault_upstream unused([](int, int) {});
  std::string yaml = gateway_yaml(unused.port,
                                  "header_timeout: 5s, keepalive_timeout: 30s, "
                                  "max_connections_per_address: 4, max_connections_per_network: 6");
  yaml.replace(yaml.find("workers: 1"), 10, "workers: 2");
  yaml += "trusted_proxies: [127.0.0.1/32]\n";
  gateway gw(yaml, policy_yaml, echo.port);
  // The balancer (127.0.0.1) holds 40 keep-alive connections, each for another client.
  std::vector<std::unique_ptr<raw_client>> balancer;
  for (int i = 0; i < 40; ++i)
    balancer.push_back(std::make_unique<raw_client>(gw.port, "127.0.0.1"));
  int served = 0;
  for (int round = 0; round < 2; ++round) {
    for (std::size_t i = 0; i < balancer.size(); ++i) {
      const std::string client = "198.51.100." + std::to_string(i + 1);
      // Half the balancer's entries carry the client's port, as some balancers write them.
      const std::string entry = client + (i % 2 == 1 ? ":" + std::to_string(40000 + i) : "");
      balancer[i]->send(get("/via", "X-Forwarded-For: " + entry + "\r\n"));
      const auto r = balancer[i]->read_response();
      if (r.status == 200 && r.body.find("[\"X-Real-IP\",\"" + client + "\"]") != std::string::npos)
        ++served;
    }
  }
  CHECK(served == 80);
  for (const char* reason : {"per_address", "per_network"}) {
    CHECK(
        metric(gw, std::string("tollgate_connections_refused_total{listener=\"public\",reason=\"") +
                       reason + "\"}") == 0);
  }
  // An untrusted address of the same network is still capped (4 of 6 held).
  std::vector<std::unique_ptr<raw_client>> direct;
  for (int i = 0; i < 5; ++i)
    direct.push_back(std::make_unique<raw_client>(gw.port, "127.0.0.7"));
  CHECK(wait_for_metric(
      gw, "tollgate_connections_refused_total{listener=\"public\",reason=\"per_address\"}", 1));
}

TEST_CASE("one network's many addresses hold max_connections_per_network, no more",
          "[integration][hostile]") {
  echo_server echo;
  fault_upstream unused([](int, int) {});
  std::string yaml = gateway_yaml(unused.port,
                                  "header_timeout: 5s, max_connections: 1000, "
                                  "max_connections_per_address: 150, "
                                  "max_connections_per_network: 20");
  yaml.replace(yaml.find("workers: 1"), 10, "workers: 2");
  gateway gw(yaml, policy_yaml, echo.port);
  // Eight addresses of 127.0.5.0/24, 5 half-sent heads each: 20 held, 20 refused.
  std::vector<std::unique_ptr<raw_client>> slow;
  for (int a = 1; a <= 8; ++a) {
    for (int i = 0; i < 5; ++i) {
      slow.push_back(std::make_unique<raw_client>(gw.port, "127.0.5." + std::to_string(a)));
      slow.back()->send("GET / HTTP/1.1\r\n");
    }
  }
  const std::string refused =
      "tollgate_connections_refused_total{listener=\"public\",reason=\"per_network\"}";
  REQUIRE(wait_for_metric(gw, refused, 20));
  // Twenty new clients of other networks are all served.
  int served = 0;
  for (int i = 0; i < 20; ++i)
    served += request(gw.port, get("/new"), "127.0." + std::to_string(10 + i) + ".1").status == 200;
  CHECK(served == 20);
  CHECK(metric(gw, refused) == 20);
  // A place is given back when its connection ends.
  slow.clear();
  REQUIRE(eventually(
      [&] { return metric(gw, "tollgate_connections_active{listener=\"public\"}") == 0; }));
  CHECK(request(gw.port, get("/back"), "127.0.5.9").status == 200);
}

TEST_CASE("at max_connections an idle keep-alive connection makes room for a new client",
          "[integration][hostile]") {
  echo_server echo;
  fault_upstream unused([](int, int) {});
  gateway gw(gateway_yaml(unused.port,
                          "header_timeout: 5s, keepalive_timeout: 30s, "
                          "max_connections: 3"),
             policy_yaml, echo.port);
  std::vector<std::unique_ptr<raw_client>> idle;
  for (int i = 0; i < 3; ++i) {
    idle.push_back(std::make_unique<raw_client>(gw.port));
    idle.back()->send(get("/first"));
    REQUIRE(idle.back()->read_response().status == 200);  // then idle, kept alive
  }
  raw_client newcomer(gw.port, "127.0.0.2");
  newcomer.send(get("/new"));
  CHECK(newcomer.read_response().status == 200);
  CHECK(idle.front()->closed_within(2s));  // the oldest idle one went
  CHECK(metric(gw, "tollgate_idle_connections_closed_total{listener=\"public\"}") == 1);

  // Connections in the middle of a request are never closed for room: then a newcomer is
  // refused.
  std::vector<std::unique_ptr<raw_client>> busy;
  idle.clear();
  newcomer.send("GET /busy HTTP/1.1\r\n");
  // Its half head read: not idle any more.
  REQUIRE(eventually([&] { return read_by_gateway(newcomer, gw.port); }));
  for (int i = 0; i < 2; ++i) {
    busy.push_back(std::make_unique<raw_client>(gw.port));
    busy.back()->send("GET /busy HTTP/1.1\r\n");
  }
  for (auto& c : busy)
    REQUIRE(eventually([&] { return read_by_gateway(*c, gw.port); }));
  raw_client refused(gw.port, "127.0.0.3");
  CHECK(refused.closed_within(2s));
  CHECK(metric(gw,
               "tollgate_connections_refused_total{listener=\"public\",reason=\"max_"
               "connections\"}") == 1);
}

TEST_CASE("behind the PROXY protocol the cap counts the client the header names",
          "[integration][hostile]") {
  echo_server echo;
  fault_upstream unused([](int, int) {});
  std::string yaml =
      gateway_yaml(unused.port, "header_timeout: 5s, max_connections_per_address: 2");
  yaml.replace(yaml.find("port: 0 }]"), 10, "port: 0, proxy_protocol: true }]");
  gateway gw(yaml, policy_yaml, echo.port);
  auto proxied = [](const char* client) {
    return std::string("PROXY TCP4 ") + client + " 127.0.0.1 40000 80\r\n";
  };
  // Every connection comes from the balancer (127.0.0.1); two of them carry 203.0.113.7.
  std::vector<std::unique_ptr<raw_client>> held;
  for (int i = 0; i < 2; ++i) {
    held.push_back(std::make_unique<raw_client>(gw.port));
    held.back()->send(proxied("203.0.113.7") + "GET / HTTP/1.1\r\n");
  }
  // Both headers read (one worker: their slots are taken before the third is accepted).
  for (auto& c : held)
    REQUIRE(eventually([&] { return read_by_gateway(*c, gw.port); }));
  raw_client third(gw.port);
  third.send(proxied("203.0.113.7") + get("/third"));
  CHECK(third.closed_within(2s));
  raw_client other(gw.port);
  other.send(proxied("198.51.100.4") + get("/other"));
  const auto r = other.read_response();
  CHECK(r.status == 200);
  CHECK(r.body.find(R"(["X-Real-IP","198.51.100.4"])") != std::string::npos);
}

TEST_CASE("a Content-Length past 2^63 reaches the client as it was sent",
          "[integration][hostile]") {
  echo_server echo;
  fault_upstream up([](int fd, int) {
    std::string rest;
    fault_upstream::read_head(fd, rest);
    fault_upstream::write_all(
        fd, "HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775808\r\n\r\nthe start");
  });
  gateway gw(gateway_yaml(up.port, default_limits), policy_yaml, echo.port);
  raw_client c(gw.port);
  c.send(get("/fault/huge"));
  // Only the head can be read whole: the body ends early when the upstream closes.
  std::string head;
  char buf[4096];
  while (head.find("\r\n\r\n") == std::string::npos) {
    const ssize_t n = ::recv(c.fd(), buf, sizeof buf, 0);
    if (n <= 0) break;
    head.append(buf, static_cast<std::size_t>(n));
  }
  CHECK(head.find("\r\nContent-Length: 9223372036854775808\r\n") != std::string::npos);
  CHECK(serving(gw));
}

TEST_CASE("a keep-alive connection idle past its buffer release is served as before",
          "[integration][hostile]") {
  echo_server echo;
  fault_upstream unused([](int, int) {});
  gateway gw(gateway_yaml(unused.port, default_limits), policy_yaml, echo.port);
  raw_client c(gw.port);
  c.send(get("/before"));
  REQUIRE(c.read_response().status == 200);
  // Past a second idle the watchdog takes the connection's buffers back (a cancelled read);
  // the next request must neither be lost nor end the connection. The sleeps here are the
  // condition itself: the release comes after `idle_release` (1 s, gateway/net/session.cpp) of
  // quiet and shows in no metric or socket state.
  std::this_thread::sleep_for(2500ms);
  c.send(get("/after-idle"));
  const auto r = c.read_response();
  CHECK(r.status == 200);
  CHECK(r.body.find(R"("target":"/after-idle")") != std::string::npos);
  // Split across the release as well: a head that starts, pauses past it, and ends.
  std::this_thread::sleep_for(2500ms);
  c.send("GET /split HTTP/1.1\r\n");
  std::this_thread::sleep_for(1500ms);
  c.send("Host: t\r\n\r\n");
  CHECK(c.read_response().status == 200);
}

TEST_CASE("a head that trickles in is collected whole, and its body follows",
          "[integration][hostile]") {
  echo_server echo;
  fault_upstream unused([](int, int) {});
  gateway gw(gateway_yaml(unused.port, default_limits), policy_yaml, echo.port);
  raw_client c(gw.port);
  const std::string head = "POST /trickle HTTP/1.1\r\nHost: t\r\nX-Long: " + std::string(300, 'v') +
                           "\r\nContent-Length: 5\r\n\r\n";
  // Nine pieces with pauses: each time the gateway finds no end of head and waits (without its
  // scratch) for the rest; the last piece carries the end of the head and the body.
  const std::size_t piece = head.size() / 9;
  std::size_t at = 0;
  for (; at + piece < head.size(); at += piece) {
    c.send(head.substr(at, piece));
    std::this_thread::sleep_for(40ms);  // pacing: the client's own rate
  }
  c.send(head.substr(at) + "hello");
  const auto r = c.read_response();
  CHECK(r.status == 200);
  CHECK(r.body.find(R"("target":"/trickle")") != std::string::npos);
  CHECK(r.body.find(R"("body_bytes":5)") != std::string::npos);
  CHECK(r.body.find(fnv1a64_hex("hello")) != std::string::npos);
  // Garbage that can never be a request is refused at once, not when it ends.
  raw_client bad(gw.port);
  bad.send("\x01\x02 nonsense");
  CHECK(bad.read_response(1s).status == 400);
}
