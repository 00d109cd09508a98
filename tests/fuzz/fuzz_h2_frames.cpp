// The HTTP/2 frame layer (docs/design.md §17): arbitrary bytes after the client preface, sent to
// the gateway's own server in this process (net::server, one worker, a listener with http2),
// cut into pieces at places the input chooses. Whatever nghttp2 and the connection make of them
// (streams admitted and answered 502 by an upstream that refuses, 431s, resets, GOAWAYs), the
// gateway must not crash, leak or hang: each input's connection is read to its end, which the
// gateway must bring within the bounds of its timeouts.

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>

#include "gateway/config/gateway.hpp"
#include "gateway/core/clock.hpp"
#include "gateway/metrics/exposition.hpp"
#include "gateway/net/server.hpp"
#include "gateway/store/local_store.hpp"

using namespace tollgate;

namespace {

struct gateway {
  gateway() {
    dir =
        std::filesystem::temp_directory_path() / ("tollgate-fuzz-h2-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "policy.yaml") << R"(
categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }
  guarded:
    pow: { enabled: false, on_limit: true, on_limit_bits: 8 }
    limits:
      ipv4_individual: { short: { rate: 1/h, burst: 1 } }
)";
    // An upstream on a port nothing listens on: admitted streams get 502 at once.
    std::ofstream(dir / "gateway.yaml")
        << "listeners: [{ name: public, address: 127.0.0.1, port: 0, http2: true }]\n"
           "admin: { address: 127.0.0.1, port: 0 }\n"
           "workers: 1\n"
           "limits: { body_timeout: 1s, header_timeout: 1s, keepalive_timeout: 1s, "
           "max_header_bytes: 2048, max_concurrent_streams: 8 }\n"
           "upstreams: { app: { endpoints: [\"127.0.0.1:9\"], connect_timeout: 1s } }\n"
           "routes: [{ match: { path_prefix: /g }, category: guarded, upstream: app }]\n"
           "default_route: { category: general, upstream: app }\n"
           "policies: [policy.yaml]\n";
    auto cfg = config::load_gateway((dir / "gateway.yaml").string());
    pow = std::make_unique<policy::pow_state>("fuzz-secret", cfg.pow, cfg.policy.pow_counters);
    shared = std::make_unique<net::shared_state>(net::shared_state{store, clock, *pow});
    auto snap = std::make_shared<const net::snapshot>(std::move(cfg), core::siphash_key{1, 2},
                                                      metrics, *pow);
    server = std::make_unique<net::server>(snap, *shared, 1, snap->config.limits.max_connections,
                                           metrics);
    server->bind();
    port = server->bound().front().second.port();
    server->start();
  }

  std::filesystem::path dir;
  store::local_store store{{}, 1};
  core::steady_unix_clock clock;
  metrics::registry metrics;
  std::unique_ptr<policy::pow_state> pow;
  std::unique_ptr<net::shared_state> shared;
  std::unique_ptr<net::server> server;
  std::uint16_t port = 0;
};

gateway& the_gateway() {
  static gateway* const g = new gateway();  // for the process: never stopped
  return *g;
}

/// Sends all of `bytes`, false when the gateway closed first.
bool send_all(int fd, const std::uint8_t* p, std::size_t n) {
  while (n > 0) {
    const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0) return false;
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  gateway& g = the_gateway();
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(g.port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0) {
    ::close(fd);
    return 0;
  }
  static constexpr std::string_view preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  bool open = send_all(fd, reinterpret_cast<const std::uint8_t*>(preface.data()), preface.size());
  // The first byte says where the rest is cut: pieces of 1 to 256 bytes, each its own send.
  const std::size_t piece = size > 0 ? std::size_t{data[0]} + 1 : 1;
  for (std::size_t at = size > 0 ? 1 : 0; open && at < size; at += piece) {
    open = send_all(fd, data + at, std::min(piece, size - at));
  }
  ::shutdown(fd, SHUT_WR);
  // Read to the end: the gateway ends the connection once the client's side has ended.
  char sink[16384];
  // Every bound of the gateway's configuration above is a second: fifteen is a hang, not
  // a slow machine. FUZZ_H2_PAUSE=1 holds the process then, to look at it (ss, gdb).
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        give_up - std::chrono::steady_clock::now());
    const int ready = ::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(left.count(), 0)));
    // libFuzzer's -timeout alarm (SIGALRM, every few seconds) interrupts the poll when it
    // lands on this thread: that is not the gateway's doing. (Taken for a hang, it failed
    // CI's fuzz step about one run in four.)
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      if (std::getenv("FUZZ_H2_PAUSE") != nullptr) {
        std::fprintf(stderr, "fuzz_h2_frames: connection %d never ended\n", fd);
        for (;;)
          ::pause();  // a signal (libFuzzer's alarm among them) does not end it
      }
      __builtin_trap();
    }
    const ssize_t n = ::recv(fd, sink, sizeof sink, 0);
    if (n <= 0) break;
  }
  ::close(fd);
  return 0;
}
