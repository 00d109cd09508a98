// tollgate_ws_load: a WebSocket load client for bench/websocket.sh (one thread, Beast,
// binary messages, no permessage-deflate, one frame per message).
//
//   tollgate_ws_load throughput --host H --port P [--path /ws/bench] --connections C --size S
//                    --seconds T [--window W] [--warmup T]
//     each connection keeps W messages (default 16) in flight; prints the echoed messages
//     received per second over all connections and MiB/s (payload bytes received). With
//     --cpu-pids A,B,... also the CPU time (user + system, from /proc) those processes used
//     per echoed message over the same interval.
//   tollgate_ws_load latency --host H --port P --rate R --seconds T --size S [--connections C]
//                    [--warmup T]
//     sends R messages/s in total (paced by a timer, round-robin over C connections, default
//     16), each stamped with its send time; prints the round trip's p50/p99/p999/max in us.
//   tollgate_ws_load idle --host H --port P --connections N --hold SECONDS [--sources K]
//     opens N connections (a few hundred handshakes at a time), prints "open N", holds them
//     idle for SECONDS (a read pending on each, so a close by the peer is seen), then closes
//     them. --sources K binds connection i to 127.0.0.(1 + i % K) (K <= 254), more ephemeral
//     ports than one source address has.
//
// Common: --warmup T seconds of traffic before the measured interval (default 1);
// --batch B concurrent handshakes while opening (default 256). Every failure
// (refused handshake, unexpected close, short echo) is printed (the first 10) and counted;
// the exit code is 1 if there was any, 2 for bad arguments.

#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;
using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;
constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);

namespace {

struct options {
  std::string mode;
  std::string host = "127.0.0.1";
  unsigned short port = 0;
  std::string path = "/ws/bench";
  std::size_t connections = 0;
  std::size_t size = 64;
  double seconds = 5;
  double warmup = 1;
  std::size_t window = 16;
  double rate = 10000;
  double hold = 5;
  unsigned sources = 1;
  std::size_t batch = 256;
  std::vector<int> cpu_pids;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "tollgate_ws_load: %s\n"
               "usage: tollgate_ws_load throughput|latency|idle --host H --port P [--path P]\n"
               "       [--connections C] [--size S] [--seconds T] [--warmup T] [--window W]\n"
               "       [--rate R] [--hold T] [--sources K] [--batch B] [--cpu-pids A,B]\n",
               why);
  std::exit(2);
}

options parse(int argc, char** argv) {
  if (argc < 2) usage("no mode");
  options o;
  o.mode = argv[1];
  if (o.mode != "throughput" && o.mode != "latency" && o.mode != "idle") usage("unknown mode");
  for (int i = 2; i < argc; i += 2) {
    const std::string k = argv[i];
    if (i + 1 >= argc) usage(("no value for " + k).c_str());
    const char* v = argv[i + 1];
    char* end = nullptr;
    const double d = std::strtod(v, &end);
    const bool numeric = end != v && *end == '\0' && d >= 0;
    auto num = [&] {
      if (!numeric) usage(("bad number for " + k).c_str());
      return d;
    };
    if (k == "--host") {
      o.host = v;
    } else if (k == "--path") {
      o.path = v;
    } else if (k == "--port") {
      o.port = static_cast<unsigned short>(num());
    } else if (k == "--connections") {
      o.connections = static_cast<std::size_t>(num());
    } else if (k == "--size") {
      o.size = static_cast<std::size_t>(num());
    } else if (k == "--seconds") {
      o.seconds = num();
    } else if (k == "--warmup") {
      o.warmup = num();
    } else if (k == "--window") {
      o.window = static_cast<std::size_t>(num());
    } else if (k == "--rate") {
      o.rate = num();
    } else if (k == "--hold") {
      o.hold = num();
    } else if (k == "--sources") {
      o.sources = static_cast<unsigned>(num());
    } else if (k == "--cpu-pids") {
      for (const char* p = v; *p;) {
        char* e = nullptr;
        const long pid = std::strtol(p, &e, 10);
        if (e == p || pid <= 0) usage("bad --cpu-pids");
        o.cpu_pids.push_back(static_cast<int>(pid));
        p = *e == ',' ? e + 1 : e;
        if (*e != ',' && *e != '\0') usage("bad --cpu-pids");
      }
    } else if (k == "--batch") {
      o.batch = static_cast<std::size_t>(num());
    } else {
      usage(("unknown option " + k).c_str());
    }
  }
  if (o.port == 0) usage("--port is required");
  if (o.connections == 0) o.connections = o.mode == "latency" ? 16 : 1;
  if (o.window == 0 || o.batch == 0) usage("--window and --batch must be at least 1");
  if (o.sources == 0 || o.sources > 254) usage("--sources must be 1..254");
  if (o.mode == "latency" && (o.size < 8 || o.rate <= 0))
    usage("latency needs --size >= 8, --rate > 0");
  return o;
}

// Failures: counted, the first few printed.
std::size_t failures = 0;
void fail(const std::string& what) {
  if (++failures <= 10) std::fprintf(stderr, "tollgate_ws_load: %s\n", what.c_str());
  if (failures == 10) std::fprintf(stderr, "tollgate_ws_load: (further failures not printed)\n");
}

using ws_stream = websocket::stream<beast::tcp_stream>;

/// One client connection and what the modes keep beside it.
struct connection {
  explicit connection(asio::io_context& io) : ws(io), wake(io) {}
  ws_stream ws;
  beast::flat_buffer buffer;
  asio::steady_timer wake;    ///< cancelled to wake its writer
  std::size_t credits = 0;    ///< messages it may still send (throughput)
  std::size_t in_flight = 0;  ///< sent and not yet echoed
  std::deque<int> queue;      ///< messages due and not yet written (latency)
  bool open = false;
  bool closing = false;  ///< our close has started: a closed read is expected
  bool reader_done = false;
};

/// Opens connection `index`: TCP connect (from 127.0.0.(1 + index % sources) if sources > 1)
/// and the handshake. No deflate, one frame per message, the whole message in one write.
asio::awaitable<bool> open(connection& c, const options& o, tcp::endpoint to, std::size_t index) {
  auto& sock = beast::get_lowest_layer(c.ws).socket();
  beast::error_code ec;
  sock.open(to.protocol(), ec);
  if (!ec && o.sources > 1) {
    int one = 1;  // the port is chosen at connect, per destination: no bind-time port shortage
    ::setsockopt(sock.native_handle(), IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
    const auto src = asio::ip::address_v4((127u << 24) | (1u + index % o.sources));
    sock.bind(tcp::endpoint(src, 0), ec);
  }
  if (ec) {
    fail("socket: " + ec.message());
    co_return false;
  }
  beast::get_lowest_layer(c.ws).expires_after(30s);
  auto [cec] = co_await beast::get_lowest_layer(c.ws).async_connect(to, tuple_awaitable);
  if (cec) {
    fail("connect: " + cec.message());
    co_return false;
  }
  sock.set_option(tcp::no_delay(true), ec);
  beast::get_lowest_layer(c.ws).expires_never();
  // Handshake and close bounded (30 s), no idle timeout, no pings of our own.
  c.ws.set_option(websocket::stream_base::timeout::suggested(beast::role_type::client));
  websocket::permessage_deflate pmd;
  pmd.client_enable = false;
  c.ws.set_option(pmd);
  c.ws.auto_fragment(false);
  c.ws.write_buffer_bytes(std::max<std::size_t>(o.size + 16, 4096));
  c.ws.binary(true);
  websocket::response_type res;
  auto [hec] = co_await c.ws.async_handshake(res, o.host + ":" + std::to_string(o.port), o.path,
                                             tuple_awaitable);
  if (hec) {
    const unsigned status = res.result_int();
    fail("handshake: " + hec.message() +
         (status != 0 ? " (HTTP " + std::to_string(status) + ")" : std::string()));
    co_return false;
  }
  c.open = true;
  co_return true;
}

/// Opens every connection, at most o.batch handshakes at a time; true if all opened.
asio::awaitable<bool> open_all(std::vector<std::unique_ptr<connection>>& conns, const options& o,
                               tcp::endpoint to) {
  auto ex = co_await asio::this_coro::executor;
  std::size_t next = 0, running = 0;
  asio::steady_timer done(ex, clock_type::time_point::max());
  const std::size_t lanes = std::min(o.batch, conns.size());
  for (std::size_t lane = 0; lane < lanes; ++lane) {
    ++running;
    asio::co_spawn(
        ex,
        [&]() -> asio::awaitable<void> {
          while (next < conns.size() && failures == 0) {
            const std::size_t i = next++;
            co_await open(*conns[i], o, to, i);
          }
        },
        [&](std::exception_ptr e) {
          if (e) fail("open: exception");
          if (--running == 0) done.cancel();
        });
  }
  co_await done.async_wait(tuple_awaitable);
  co_return std::all_of(conns.begin(), conns.end(), [](auto& c) { return c->open; });
}

/// The end of a read that our own close explains: Beast ends a read pending when the close
/// starts with operation_aborted, a later one with closed.
bool expected_end(const connection& c, beast::error_code ec) {
  return c.closing && (ec == websocket::error::closed || ec == asio::error::operation_aborted);
}

/// Closes a connection (a read is pending on it: see expected_end).
asio::awaitable<void> close(connection& c) {
  if (!c.open) co_return;
  c.closing = true;
  auto [ec] = co_await c.ws.async_close(websocket::close_code::normal, tuple_awaitable);
  if (ec && ec != websocket::error::closed) fail("close: " + ec.message());
}

/// Waits (a timer at most `until`) until `pred` holds; the timer is cancelled to re-check.
template <class Pred>
asio::awaitable<bool> wait_for(asio::steady_timer& t, clock_type::time_point until, Pred pred) {
  while (!pred()) {
    if (clock_type::now() >= until) co_return false;
    t.expires_at(until);
    co_await t.async_wait(tuple_awaitable);
  }
  co_return true;
}

clock_type::duration secs(double s) {
  return std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(s));
}

std::vector<std::unique_ptr<connection>> make_connections(asio::io_context& io, std::size_t n) {
  std::vector<std::unique_ptr<connection>> conns;
  conns.reserve(n);
  for (std::size_t i = 0; i < n; ++i)
    conns.push_back(std::make_unique<connection>(io));
  return conns;
}

/// CPU seconds (user + system, all threads) the processes have used; -1 if one is gone.
double cpu_seconds(const std::vector<int>& pids) {
  double ticks = 0;
  for (int pid : pids) {
    const std::string path = "/proc/" + std::to_string(pid) + "/stat";
    std::FILE* f = std::fopen(path.c_str(), "r");
    if (!f) return -1;
    char buf[1024];
    const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    buf[n] = '\0';
    const char* p = std::strrchr(buf, ')');  // the command name may hold spaces
    unsigned long long utime = 0, stime = 0;
    // After ")": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
    if (!p || std::sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime,
                          &stime) != 2)
      return -1;
    ticks += static_cast<double>(utime + stime);
  }
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// ---- throughput ------------------------------------------------------------------------------

struct counters {
  bool counting = false;
  std::uint64_t messages = 0;
  std::uint64_t bytes = 0;
};

asio::awaitable<void> throughput_reader(connection& c, const options& o, counters& n) {
  for (;;) {
    auto [ec, len] = co_await c.ws.async_read(c.buffer, tuple_awaitable);
    if (ec) {
      if (!expected_end(c, ec)) fail("read: " + ec.message());
      break;
    }
    if (len != o.size)
      fail("echo of " + std::to_string(len) + " bytes, sent " + std::to_string(o.size));
    c.buffer.consume(c.buffer.size());
    if (n.counting) {
      ++n.messages;
      n.bytes += len;
    }
    --c.in_flight;
    ++c.credits;
    c.wake.cancel();
  }
  c.reader_done = true;
  c.wake.cancel();
}

/// A writer's end: what was sent comes back before the close (2 s at most).
asio::awaitable<void> finish(connection& c) {
  co_await wait_for(c.wake, clock_type::now() + 2s,
                    [&] { return c.in_flight == 0 || c.reader_done; });
  if (c.in_flight != 0) fail(std::to_string(c.in_flight) + " messages never echoed");
  if (!c.reader_done) co_await close(c);
}

asio::awaitable<void> throughput_writer(connection& c, const std::string& payload,
                                        const bool& stop) {
  while (!stop && !c.reader_done) {
    if (c.credits == 0) {
      c.wake.expires_at(clock_type::time_point::max());
      co_await c.wake.async_wait(tuple_awaitable);
      continue;
    }
    --c.credits;
    ++c.in_flight;
    auto [ec, n] = co_await c.ws.async_write(asio::buffer(payload), tuple_awaitable);
    if (ec) {
      fail("write: " + ec.message());
      co_return;
    }
  }
  co_await finish(c);
}

asio::awaitable<void> run_throughput(asio::io_context& io, const options& o, tcp::endpoint to) {
  auto conns = make_connections(io, o.connections);
  if (!co_await open_all(conns, o, to)) co_return;
  const std::string payload(o.size, 'x');
  counters n;
  bool stop = false;
  std::size_t running = 0;
  asio::steady_timer done(io, clock_type::time_point::max());
  auto finished = [&](std::exception_ptr e) {
    if (e) fail("exception");
    if (--running == 0) done.cancel();
  };
  for (auto& c : conns) {
    c->credits = o.window;
    running += 2;
    asio::co_spawn(io, throughput_reader(*c, o, n), finished);
    asio::co_spawn(io, throughput_writer(*c, payload, stop), finished);
  }
  asio::steady_timer t(io);
  t.expires_after(secs(o.warmup));
  co_await t.async_wait(tuple_awaitable);
  n.counting = true;
  const auto start = clock_type::now();
  const double cpu_before = cpu_seconds(o.cpu_pids);
  t.expires_after(secs(o.seconds));
  co_await t.async_wait(tuple_awaitable);
  n.counting = false;
  const double cpu_used = cpu_seconds(o.cpu_pids) - cpu_before;
  const double elapsed = std::chrono::duration<double>(clock_type::now() - start).count();
  stop = true;
  for (auto& c : conns)
    c->wake.cancel();
  co_await done.async_wait(tuple_awaitable);
  std::printf(
      "throughput connections=%zu size=%zu window=%zu seconds=%.2f messages=%llu "
      "messages/s=%.0f MiB/s=%.2f errors=%zu",
      o.connections, o.size, o.window, elapsed, static_cast<unsigned long long>(n.messages),
      n.messages / elapsed, n.bytes / elapsed / (1 << 20), failures);
  if (!o.cpu_pids.empty() && cpu_before >= 0 && n.messages > 0) {
    std::printf(" cpu_us_per_message=%.2f cpu_share=%.2f", cpu_used * 1e6 / n.messages,
                cpu_used / elapsed);
  }
  std::printf("\n");
}

// ---- latency ---------------------------------------------------------------------------------

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now().time_since_epoch())
      .count();
}

struct latency_state {
  std::int64_t record_from = 0;   ///< messages sent before this (warm-up) are not recorded
  std::vector<std::int64_t> rtt;  ///< nanoseconds
  std::uint64_t sent = 0;
  bool stop = false;
};

asio::awaitable<void> latency_reader(connection& c, const options& o, latency_state& s) {
  for (;;) {
    auto [ec, len] = co_await c.ws.async_read(c.buffer, tuple_awaitable);
    const std::int64_t now = now_ns();
    if (ec) {
      if (!expected_end(c, ec)) fail("read: " + ec.message());
      break;
    }
    if (len != o.size) {
      fail("echo of " + std::to_string(len) + " bytes, sent " + std::to_string(o.size));
    } else {
      std::int64_t sent;
      std::memcpy(&sent, c.buffer.data().data(), sizeof sent);
      if (sent >= s.record_from) s.rtt.push_back(now - sent);
    }
    c.buffer.consume(c.buffer.size());
    --c.in_flight;
    c.wake.cancel();
  }
  c.reader_done = true;
  c.wake.cancel();
}

asio::awaitable<void> latency_writer(connection& c, const options& o, latency_state& s) {
  std::string payload(o.size, 'x');
  for (;;) {
    if (c.queue.empty()) {
      if (s.stop || c.reader_done) break;
      c.wake.expires_at(clock_type::time_point::max());
      co_await c.wake.async_wait(tuple_awaitable);
      continue;
    }
    c.queue.pop_front();
    const std::int64_t t = now_ns();  // the send time travels in the message
    std::memcpy(payload.data(), &t, sizeof t);
    ++c.in_flight;
    auto [ec, n] = co_await c.ws.async_write(asio::buffer(payload), tuple_awaitable);
    if (ec) {
      fail("write: " + ec.message());
      co_return;
    }
  }
  co_await finish(c);
}

asio::awaitable<void> run_latency(asio::io_context& io, const options& o, tcp::endpoint to) {
  auto conns = make_connections(io, o.connections);
  if (!co_await open_all(conns, o, to)) co_return;
  latency_state s;
  s.rtt.reserve(static_cast<std::size_t>(o.rate * o.seconds * 1.1) + 16);
  std::size_t running = 0;
  asio::steady_timer done(io, clock_type::time_point::max());
  auto finished = [&](std::exception_ptr e) {
    if (e) fail("exception");
    if (--running == 0) done.cancel();
  };
  for (auto& c : conns) {
    running += 2;
    asio::co_spawn(io, latency_reader(*c, o, s), finished);
    asio::co_spawn(io, latency_writer(*c, o, s), finished);
  }
  // Message i is due at start + i / rate; every wake-up hands out all messages due by then.
  const auto start = clock_type::now();
  const auto period = std::chrono::duration<double>(1.0 / o.rate);
  const auto measure_from = start + secs(o.warmup);
  const auto end = measure_from + secs(o.seconds);
  s.record_from =
      std::chrono::duration_cast<std::chrono::nanoseconds>(measure_from.time_since_epoch()).count();
  asio::steady_timer pace(io);
  std::uint64_t i = 0, measured_sent = 0;
  for (;;) {
    const auto due = start + std::chrono::duration_cast<clock_type::duration>(period * double(i));
    if (due >= end) break;
    pace.expires_at(due);
    co_await pace.async_wait(tuple_awaitable);
    const auto now = clock_type::now();
    for (;; ++i) {
      const auto d = start + std::chrono::duration_cast<clock_type::duration>(period * double(i));
      if (d > now || d >= end) break;
      connection& c = *conns[i % conns.size()];
      if (c.reader_done) continue;
      c.queue.push_back(0);
      c.wake.cancel();
      if (d >= measure_from) ++measured_sent;
    }
  }
  const double elapsed = std::chrono::duration<double>(clock_type::now() - measure_from).count();
  s.stop = true;
  for (auto& c : conns)
    c->wake.cancel();
  co_await done.async_wait(tuple_awaitable);
  std::sort(s.rtt.begin(), s.rtt.end());
  auto pct = [&](double p) -> double {
    if (s.rtt.empty()) return 0;
    std::size_t k = static_cast<std::size_t>(p * (s.rtt.size() - 1) + 0.5);
    return s.rtt[std::min(k, s.rtt.size() - 1)] / 1000.0;
  };
  std::printf(
      "latency connections=%zu size=%zu rate=%.0f achieved=%.0f samples=%zu p50_us=%.1f "
      "p99_us=%.1f p999_us=%.1f max_us=%.1f errors=%zu\n",
      o.connections, o.size, o.rate, measured_sent / elapsed, s.rtt.size(), pct(0.50), pct(0.99),
      pct(0.999), s.rtt.empty() ? 0.0 : s.rtt.back() / 1000.0, failures);
}

// ---- idle ------------------------------------------------------------------------------------

asio::awaitable<void> idle_reader(connection& c) {
  auto [ec, len] = co_await c.ws.async_read(c.buffer, tuple_awaitable);
  if (!ec) {
    fail("a message arrived on an idle connection");
  } else if (!expected_end(c, ec)) {
    fail("idle connection ended: " + ec.message());
  }
  c.reader_done = true;
}

asio::awaitable<void> run_idle(asio::io_context& io, const options& o, tcp::endpoint to) {
  auto conns = make_connections(io, o.connections);
  const auto t0 = clock_type::now();
  const bool all = co_await open_all(conns, o, to);
  const double open_secs = std::chrono::duration<double>(clock_type::now() - t0).count();
  std::size_t running = 0;
  asio::steady_timer done(io, clock_type::time_point::max());
  auto finished = [&](std::exception_ptr e) {
    if (e) fail("exception");
    if (--running == 0) done.cancel();
  };
  for (auto& c : conns) {
    if (!c->open) continue;
    ++running;
    asio::co_spawn(io, idle_reader(*c), finished);
  }
  if (all) {
    std::printf("open %zu (%.2f s)\n", conns.size(), open_secs);
    std::fflush(stdout);
    asio::steady_timer t(io);
    t.expires_after(secs(o.hold));
    co_await t.async_wait(tuple_awaitable);
  }
  // Close (the same few hundred at a time as the opening).
  std::size_t next = 0, closers = 0;
  asio::steady_timer closed(io, clock_type::time_point::max());
  for (std::size_t lane = 0; lane < std::min(o.batch, conns.size()); ++lane) {
    ++closers;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          while (next < conns.size()) {
            connection& c = *conns[next++];
            if (c.reader_done) c.open = false;  // the peer ended it: already counted
            co_await close(c);
          }
        },
        [&](std::exception_ptr e) {
          if (e) fail("close: exception");
          if (--closers == 0) closed.cancel();
        });
  }
  co_await closed.async_wait(tuple_awaitable);
  if (running > 0) co_await done.async_wait(tuple_awaitable);
  std::printf("closed %zu errors=%zu\n", conns.size(), failures);
}

}  // namespace

int main(int argc, char** argv) {
  const options o = parse(argc, argv);
  // As many descriptors as the hard limit allows (the idle mode holds thousands).
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
  beast::error_code ec;
  const auto address = asio::ip::make_address(o.host, ec);
  if (ec) usage("--host must be an IP address");
  const tcp::endpoint to(address, o.port);
  asio::io_context io(1);
  auto body = [&]() -> asio::awaitable<void> {
    if (o.mode == "throughput") {
      co_await run_throughput(io, o, to);
    } else if (o.mode == "latency") {
      co_await run_latency(io, o, to);
    } else {
      co_await run_idle(io, o, to);
    }
  };
  asio::co_spawn(io, body(), [&](std::exception_ptr e) {
    if (e) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& x) {
        fail(std::string("exception: ") + x.what());
      }
    }
  });
  io.run();
  return failures == 0 ? 0 : 1;
}
