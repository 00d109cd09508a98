// The GCRA script on a real redis-server against the in-process store: the same requests at
// the same instants (the script's test-only "now" argument) must give identical decisions,
// identical tats and waits, and so identical header values.

#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "../unit/support.hpp"
#include "gateway/limit/headers.hpp"
#include "gateway/limit/memory_store.hpp"
#include "gateway/store/redis_wire.hpp"
#include "tests/integration/harness.hpp"
#include "tests/redis/support.hpp"

using namespace tollgate;
using namespace tollgate::limit;
using namespace tollgate::test;
namespace redis = tollgate::store::redis;

namespace {

struct context_free {
  void operator()(redisContext* c) const noexcept { redisFree(c); }
};
struct reply_free {
  void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
};
using reply_ptr = std::unique_ptr<redisReply, reply_free>;

/// A blocking hiredis connection deciding requests through the script.
class script_client {
 public:
  explicit script_client(std::uint16_t port) : c_(redisConnect("127.0.0.1", port)) {
    REQUIRE(c_);
    REQUIRE(c_->err == 0);
    reply_ptr r(static_cast<redisReply*>(redisCommand(
        c_.get(), "SCRIPT LOAD %b", redis::gcra_script().data(), redis::gcra_script().size())));
    REQUIRE(r);
    REQUIRE(r->type == REDIS_REPLY_STRING);
    REQUIRE(std::string(r->str, r->len) == redis::gcra_sha());
  }

  /// The script's decision on `req` at req.now ("" for Redis's own clock).
  decision decide(const limit_request& req, bool redis_time = false) {
    redis::command_args a;
    const std::string now = std::to_string(req.now);
    redis::build_call(a, "EVALSHA", redis::gcra_sha(), "t:", req, redis_time ? "" : now);
    reply_ptr r(static_cast<redisReply*>(redisCommandArgv(
        c_.get(), a.count, const_cast<const char**>(a.argv.data()), a.lengths.data())));
    REQUIRE(r);
    INFO((r->type == REDIS_REPLY_ERROR ? std::string(r->str, r->len) : std::string()));
    decision d;
    REQUIRE(redis::decode_decision(*r, req, d));
    return d;
  }

  /// The script's decisions on `batch` (one call; every request's now must be the same).
  std::vector<decision> decide_batch(const std::vector<limit_request>& batch) {
    std::vector<redis::batch_entry> entries;
    for (const auto& r : batch)
      entries.push_back({&r});
    redis::command_args a;
    const std::string now = std::to_string(batch.front().now);
    redis::build_call(a, "EVALSHA", redis::gcra_sha(), "t:", entries, now);
    reply_ptr r(static_cast<redisReply*>(redisCommandArgv(
        c_.get(), a.count, const_cast<const char**>(a.argv.data()), a.lengths.data())));
    REQUIRE(r);
    INFO((r->type == REDIS_REPLY_ERROR ? std::string(r->str, r->len) : std::string()));
    nanos redis_now = 0;
    REQUIRE(redis::read_now(*r, entries, redis_now));
    REQUIRE(redis_now == batch.front().now);
    std::vector<decision> out(batch.size());
    std::size_t at = 2;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      redis::script_reply sr;
      REQUIRE(redis::read_entry(*r, at, entries[i], sr));
      redis::assemble(batch[i], sr, sr.admitted, sr.shadow_limited, out[i]);
    }
    REQUIRE(at == r->elements);
    return out;
  }

  /// A command's reply.
  reply_ptr command(const char* text) {
    return reply_ptr(static_cast<redisReply*>(redisCommand(c_.get(), text)));
  }
  reply_ptr command(const char* format, const std::string& arg) {
    return reply_ptr(static_cast<redisReply*>(redisCommand(c_.get(), format, arg.c_str())));
  }

 private:
  std::unique_ptr<redisContext, context_free> c_;
};

/// Now, as Unix nanoseconds, plus `ahead`: the script's test clock must run ahead of Redis's,
/// or the keys' expiry (PXAT at the tat) would lie in the past and delete them at once.
nanos unix_now_plus(nanos ahead) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
             .count() +
         ahead;
}

/// Everything a client could see of two decisions must agree.
void require_same(const limit_request& req, const decision& local, const decision& script) {
  REQUIRE(script.admitted == local.admitted);
  REQUIRE(script.shadow_limited == local.shadow_limited);
  REQUIRE(script.count == local.count);
  for (std::uint8_t i = 0; i < local.count; ++i) {
    CAPTURE(i);
    REQUIRE(script.limits[i].group == local.limits[i].group);
    REQUIRE(script.limits[i].tier == local.limits[i].tier);
    REQUIRE(script.limits[i].tat == local.limits[i].tat);
    REQUIRE(script.limits[i].wait == local.limits[i].wait);
  }
  REQUIRE(script.binding == local.binding);
  REQUIRE(script.shadow_binding == local.shadow_binding);
  REQUIRE(script.hold == local.hold);
  REQUIRE(script.held == local.held);
  if (local.binding != no_binding) {
    const binding_view a = binding_of(req, local), b = binding_of(req, script);
    REQUIRE(a.remaining == b.remaining);
    REQUIRE(reset_unix_seconds(a) == reset_unix_seconds(b));
    if (!local.admitted) REQUIRE(retry_after_seconds(a.wait) == retry_after_seconds(b.wait));
    std::string fa, fb;
    append_ratelimit_field(fa, a, req.now);
    append_ratelimit_field(fb, b, req.now);
    REQUIRE(fa == fb);
  }
}

limit_spec named(limit_spec s, std::string state) {
  s.state_name = std::move(state);
  return s;
}

}  // namespace

TEST_CASE("the script decides the unit tests' GCRA cases as the in-process store does",
          "[redis][script]") {
  redis_server server;
  script_client client(server.port);
  memory_store local({}, 1, 1);
  const nanos t0 = unix_now_plus(7200 * sec);

  // Individual 10/s burst 5 with 100/h burst 50; network 10/s burst 3 (binds first).
  const limit_spec fine =
      named(group(params(10, sec, 5), params(100, 3600 * sec, 50), 1), "a/ipv4_individual/32");
  const limit_spec coarse =
      named(group(params(10, sec, 3), {}, 2, level::ipv4_network), "a/ipv4_network/24");
  struct step {
    const char* addr;
    nanos at;
    std::uint32_t cost;
  };
  // A burst, a rejection at the network level, refills by time, a dearer request, idle time.
  const std::vector<step> steps = {{"198.51.100.9", 0, 1},         {"198.51.100.9", 0, 1},
                                   {"198.51.100.9", 0, 1},         {"198.51.100.9", 0, 1},
                                   {"198.51.100.10", 50 * ms, 1},  {"198.51.100.9", 100 * ms, 1},
                                   {"198.51.100.9", 100 * ms, 1},  {"198.51.100.10", 250 * ms, 2},
                                   {"198.51.100.10", 500 * ms, 2}, {"198.51.100.9", 3 * sec, 3},
                                   {"198.51.100.9", 3 * sec, 1},   {"198.51.100.9", 3600 * sec, 1}};
  for (const step& s : steps) {
    CAPTURE(s.addr, s.at, s.cost);
    const auto req = ipv4_request(s.addr, &fine, &coarse, t0 + s.at, s.cost);
    require_same(req, local.decide(req), client.decide(req));
  }
}

TEST_CASE("the script holds within a limit's delay as the in-process store does",
          "[redis][script][delay]") {
  redis_server server;
  script_client client(server.port);
  memory_store local({}, 1, 1);
  const nanos t0 = unix_now_plus(7200 * sec);
  // Individual 10/s burst 5, held up to 250ms; network 10/s burst 9, held up to 2s - 1ns (its
  // nanoseconds and the tiers' add past a second in the script's limbs); a long tier too.
  limit_spec fine =
      named(group(params(10, sec, 5), params(100, 3600 * sec, 50), 1), "d/ipv4_individual/32");
  fine.delay = 250 * ms;
  fine.max_delayed = 10;
  limit_spec coarse =
      named(group(params(10, sec, 9), {}, 2, level::ipv4_network), "d/ipv4_network/24");
  coarse.delay = 2 * sec - 1;
  coarse.max_delayed = 10;
  struct step {
    const char* addr;
    nanos at;
    std::uint32_t cost;
    bool strict;  // asked without the individual level's delay (its worker is at max_delayed)
  };
  // Ten at once from one address: 5, then 2 held, then refusals; a strict one; time passing;
  // the neighbour held by the network level alone; a dearer request.
  std::vector<step> steps;
  for (int i = 0; i < 10; ++i)
    steps.push_back({"198.51.100.9", 0, 1, false});
  steps.push_back({"198.51.100.9", 150 * ms, 1, true});
  steps.push_back({"198.51.100.9", 150 * ms, 1, false});
  for (int i = 0; i < 4; ++i)
    steps.push_back({"198.51.100.10", 200 * ms, 1, false});
  steps.push_back({"198.51.100.10", 900 * ms, 2, false});
  steps.push_back({"198.51.100.9", 3 * sec, 3, false});
  int held = 0;
  for (const step& s : steps) {
    CAPTURE(s.addr, s.at, s.cost, s.strict);
    auto req = ipv4_request(s.addr, &fine, &coarse, t0 + s.at, s.cost);
    if (s.strict) req.no_delay = 1;
    const decision d = local.decide(req);
    held += d.hold > 0;
    require_same(req, d, client.decide(req));
  }
  CHECK(held >= 4);  // the table does exercise holds, by either level
  // The same requests in one batch (one now): each decided as if one after the other.
  memory_store local2({}, 1, 1);
  std::vector<limit_request> batch;
  for (int i = 0; i < 10; ++i)
    batch.push_back(ipv4_request("198.51.100.20", &fine, &coarse, t0 + 5 * sec));
  const auto decided = client.decide_batch(batch);
  for (std::size_t i = 0; i < batch.size(); ++i) {
    CAPTURE(i);
    require_same(batch[i], local2.decide(batch[i]), decided[i]);
  }
}

TEST_CASE("tats beyond 2^53 ns (a million hours of debt) are told exactly", "[redis][script]") {
  redis_server server;
  script_client client(server.port);
  memory_store local({}, 1, 1);
  const nanos t0 = unix_now_plus(7200 * sec);
  // 1/h with a burst of a million: one request of the whole burst's cost leaves a tat a
  // million hours ahead, past what a Lua number holds exactly in nanoseconds.
  const limit_spec huge =
      named(group(params(1, 3600 * sec, 1'000'000), {}, 1), "h/ipv4_individual/32");
  for (const auto& [at, cost] : std::vector<std::pair<nanos, std::uint32_t>>{
           {0, 1'000'000}, {1, 1}, {3600 * sec, 1}, {7200 * sec + 7, 2}, {7200 * sec + 9, 1}}) {
    CAPTURE(at, cost);
    const auto req = ipv4_request("192.0.2.1", &huge, nullptr, t0 + at, cost);
    require_same(req, local.decide(req), client.decide(req));
  }
}

TEST_CASE(
    "random limit sets, costs and instants decide identically in the script and in "
    "process",
    "[redis][script]") {
  redis_server server;
  script_client client(server.port);
  memory_store local({}, 1, 1);
  std::mt19937_64 rnd(20261123);
  const nanos t0 = unix_now_plus(7200 * sec);
  nanos now = t0;

  // Limits with awkward constants: T of 1 ns, a third of a second, an hour; bursts from 1 to
  // the maximum; a shadowed limit, a header-keyed one, a global one.
  const std::vector<gcra_params> shapes = {params(1'000'000'000, sec, 1),
                                           params(3, sec, 2),
                                           params(10, sec, 5),
                                           params(1, 3600 * sec, 3),
                                           params(7, 60 * sec, 1'000'000),
                                           params(1000, sec, 1000),
                                           params(1, sec, 1)};
  std::vector<limit_spec> specs;
  for (std::uint32_t i = 0; i < 24; ++i) {
    const gcra_params s = shapes[rnd() % shapes.size()];
    const gcra_params l = rnd() % 2 == 0 ? gcra_params{} : shapes[rnd() % shapes.size()];
    limit_spec spec;
    switch (i % 4) {
      case 0:
        spec = group(s, l, 100 + i);
        break;
      case 1:
        spec = group(s, l, 100 + i, level::ipv4_network);
        break;
      case 2:
        spec = keyed("k" + std::to_string(i), key_source::header, s, 100 + i);
        spec.tiers[1] = l;
        break;
      default:
        spec = keyed("g" + std::to_string(i), key_source::global, s, 100 + i);
        spec.tiers[1] = l;
        break;
    }
    spec.shadow = rnd() % 5 == 0;
    spec.state_name = "r/" + std::to_string(i);
    specs.push_back(spec);
  }

  int admitted = 0, rejected = 0, shadowed = 0;
  for (int n = 0; n < 20000; ++n) {
    // Time moves by nothing, by nanoseconds, by milliseconds or by hours.
    switch (rnd() % 6) {
      case 0:
        break;
      case 1:
        now += static_cast<nanos>(rnd() % 1000);
        break;
      case 2:
      case 3:
        now += static_cast<nanos>(rnd() % (200 * ms));
        break;
      case 4:
        now += static_cast<nanos>(rnd() % (5 * sec));
        break;
      default:
        now += static_cast<nanos>(rnd() % (3600 * sec));
        break;
    }
    const std::string addr = "198.51.100." + std::to_string(rnd() % 4);
    const auto set = rnd() % 6;  // which limits this request carries (6 sets of 4)
    limit_request req = ipv4_request(addr, &specs[set * 4], &specs[set * 4 + 1], now);
    std::uint32_t min_burst =
        std::min(specs[set * 4].tiers[0].burst, specs[set * 4 + 1].tiers[0].burst);
    for (int k = 2; k < 4; ++k) {
      if (rnd() % 3 == 0) continue;
      const limit_spec& s = specs[set * 4 + k];
      req.groups[req.group_count++] = {&s, s.source == key_source::global ? 0 : rnd() % 3 + 1};
      min_burst = std::min(min_burst, s.tiers[0].burst);
    }
    for (std::uint8_t g = 0; g < req.group_count; ++g) {
      const auto& t = req.groups[g].spec->tiers[1];
      if (t.burst != 0) min_burst = std::min(min_burst, t.burst);
    }
    req.cost = 1 + static_cast<std::uint32_t>(rnd() % std::min<std::uint32_t>(min_burst, 4));
    CAPTURE(n, addr, set, req.cost, now - t0);
    const decision a = local.decide(req);
    require_same(req, a, client.decide(req));
    admitted += a.admitted;
    rejected += !a.admitted;
    shadowed += a.shadow_limited;
  }
  // The run exercised every outcome.
  CHECK(admitted > 1000);
  CHECK(rejected > 1000);
  CHECK(shadowed > 50);
}

TEST_CASE("a batch decides its requests one after the other, as the in-process store does",
          "[redis][script]") {
  redis_server server;
  script_client client(server.port);
  memory_store local({}, 1, 1);
  std::mt19937_64 rnd(7);
  nanos now = unix_now_plus(7200 * sec);
  // Few addresses and small bursts: requests of one batch meet on the same keys.
  const limit_spec fine =
      named(group(params(10, sec, 3), params(20000, 3600 * sec, 200), 1), "b/ipv4_individual/32");
  limit_spec coarse =
      named(group(params(20, sec, 6), {}, 2, level::ipv4_network), "b/ipv4_network/24");
  limit_spec shadowed = named(keyed("s", key_source::global, params(5, sec, 4), 3, true), "b/s");
  int admitted = 0, rejected = 0;
  for (int n = 0; n < 400; ++n) {
    now += static_cast<nanos>(rnd() % (300 * ms));
    std::vector<limit_request> batch;
    const std::size_t size = 1 + rnd() % 30;
    for (std::size_t i = 0; i < size; ++i) {
      const std::string addr = "203.0.113." + std::to_string(rnd() % 3);
      limit_request r = ipv4_request(addr, &fine, &coarse, now, 1 + rnd() % 2);
      if (rnd() % 2 == 0) r.groups[r.group_count++] = {&shadowed, 0};
      batch.push_back(r);
    }
    CAPTURE(n, size);
    const auto got = client.decide_batch(batch);
    for (std::size_t i = 0; i < size; ++i) {
      CAPTURE(i);
      const decision want = local.decide(batch[i]);
      require_same(batch[i], want, got[i]);
      admitted += want.admitted;
      rejected += !want.admitted;
    }
  }
  CHECK(admitted > 500);
  CHECK(rejected > 500);
}

TEST_CASE("on Redis's clock the script writes one value per key that expires at its tat",
          "[redis][script]") {
  redis_server server;
  script_client client(server.port);
  // 10/s burst 2 and 1/h burst 1: the key lives until the hourly tat.
  const limit_spec fine =
      named(group(params(10, sec, 2), params(1, 3600 * sec, 1), 1), "a/ipv4_individual/32");
  const limit_spec coarse =
      named(group(params(100, sec, 2), {}, 2, level::ipv4_network), "a/ipv4_network/24");
  const auto req = ipv4_request("192.0.2.7", &fine, &coarse, 0);
  const decision first = client.decide(req, true);
  CHECK(first.admitted);
  // The hourly tier is spent: rejected, with Retry-After of about an hour (relative times,
  // so the gateway's "now" of 0 does not matter).
  const decision second = client.decide(req, true);
  CHECK_FALSE(second.admitted);
  const binding_view b = binding_of(req, second);
  CHECK(b.which == tier::long_term);
  CHECK(retry_after_seconds(b.wait) > 3590);
  CHECK(retry_after_seconds(b.wait) <= 3600);

  const std::string fine_key = "{t:192.0.2.0/24}a/ipv4_individual/32:192.0.2.7";
  const std::string coarse_key = "{t:192.0.2.0/24}a/ipv4_network/24:192.0.2.0";
  const auto value = client.command("GET %s", fine_key);
  REQUIRE(value->type == REDIS_REPLY_STRING);
  CHECK(value->len == 41);
  const auto ttl = client.command("PTTL %s", fine_key);
  CHECK(ttl->integer > 3590 * 1000);
  CHECK(ttl->integer <= 3600 * 1000 + 1);  // PXAT rounds the tat up to the millisecond
  // The /24 key expires with its own, short tat.
  const auto coarse_ttl = client.command("PTTL %s", coarse_key);
  CHECK(coarse_ttl->integer > 0);
  CHECK(coarse_ttl->integer <= 11);

  // A key holding something else (not the script's format) counts as fresh and is replaced.
  client.command("SET %s garbage", fine_key);
  CHECK(client.decide(req, true).admitted);
  CHECK(client.command("GET %s", fine_key)->len == 41);
}

namespace {

/// A "Redis" on a loopback port that answers every connection's first bytes with `reply`
/// (and, when `endless`, keeps sending `reply` until the peer leaves), counting connections.
class hostile_redis {
 public:
  hostile_redis(std::string reply, bool endless) : reply_(std::move(reply)), endless_(endless) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(listener_, 16) == 0);
    socklen_t len = sizeof a;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~hostile_redis() {
    stop_ = true;
    ::shutdown(listener_, SHUT_RDWR);
    ::close(listener_);
    thread_.join();
  }
  std::uint16_t port = 0;
  std::atomic<int> connections{0};
  std::atomic<std::uint64_t> bytes_sent{0};

 private:
  void serve() {
    while (!stop_) {
      const int c = ::accept(listener_, nullptr, nullptr);
      if (c < 0) return;
      ++connections;
      char buf[4096];
      if (::recv(c, buf, sizeof buf, 0) > 0) {
        timeval tv{0, 200'000};
        ::setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        do {
          const ssize_t n = ::send(c, reply_.data(), reply_.size(), MSG_NOSIGNAL);
          if (n <= 0) break;
          bytes_sent += static_cast<std::uint64_t>(n);
        } while (endless_ && !stop_);
      }
      ::close(c);
    }
  }
  std::string reply_;
  bool endless_;
  int listener_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

/// Resident memory of process `pid`, in KiB.
long rss_kib(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

/// The gateway's resident memory the hostile replies must stay under. Under AddressSanitizer
/// freed blocks wait in its quarantine (256 MiB by default) before they are reused: each link
/// refused after holding its 4 MiB leaves them there, and CI saw 213 MiB. The 16 GB an
/// unbounded reader would take is far above either bound.
#if defined(__SANITIZE_ADDRESS__)
constexpr long rss_bound_kib = (200 + 256) * 1024;
#else
constexpr long rss_bound_kib = 200 * 1024;
#endif

}  // namespace

TEST_CASE("a hostile or broken Redis costs bounded memory and the gateway keeps answering",
          "[redis][hostile]") {
  struct variant {
    const char* name;
    std::string reply;
    bool endless;
  };
  const std::vector<variant> variants = {
      // hiredis 0.14 would allocate 16 GB of element pointers for this header alone.
      {"an array of two billion elements", "*2000000000\r\n", false},
      {"nested arrays past the reply's budget",
       [] {
         std::string s = "*60000\r\n";
         for (int i = 0; i < 60; ++i)
           s += "*60000\r\n";
         return s;
       }(),
       false},
      // A bulk string that never ends: at most 4 MiB is held, then the connection goes.
      {"an endless bulk string", "$999999999\r\n" + std::string(64 * 1024, 'x'), true},
      {"not RESP at all", "HTTP/1.1 200 OK\r\n\r\n", false},
      {"the wrong SHA", "$40\r\n0000000000000000000000000000000000000000\r\n", false},
  };
  for (const variant& v : variants) {
    CAPTURE(v.name);
    hostile_redis redis(v.reply, v.endless);
    echo_server echo;
    gateway gw(
        "listeners: [{ name: public, address: 127.0.0.1, port: 0 }]\n"
        "admin: { address: 127.0.0.1, port: 0 }\n"
        "workers: 1\n"
        "upstreams: { app: { endpoints: ['{echo}'] } }\n"
        "default_route: { category: general, upstream: app }\n"
        "policies: ['{policy}']\n"
        "store: { type: redis, address: '127.0.0.1:" +
            std::to_string(redis.port) +
            "', timeout: 20ms, connect_timeout: 300ms, fail_mode: open }\n",
        "categories:\n  general:\n    limits:\n"
        "      ipv4_individual: { short: { rate: 10/s, burst: 10 } }\n",
        echo.port);
    // The link is refused, reconnects, is refused again...; requests are answered by
    // fail_mode open meanwhile, and the process stays small.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (redis.connections < 3) {
      REQUIRE(std::chrono::steady_clock::now() < until);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    for (int i = 0; i < 5; ++i) {
      const auto r = request(gw.port, get("/x"));
      CHECK(r.status == 200);
      CHECK(r.header("x-ratelimit-limit").empty());
    }
    CHECK(rss_kib(gw.process->pid()) < rss_bound_kib);
    CHECK(sample(metrics_text(gw), "tollgate_store_degraded") == 1);
    CHECK(gw.process->wait_for_line("cannot use redis")
              .find("127.0.0.1:" + std::to_string(redis.port)) != std::string::npos);
  }
}

TEST_CASE("tollgate --check-config refuses a Redis store that could not start", "[redis][config]") {
  const auto dir =
      std::filesystem::temp_directory_path() / ("tollgate-check-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "p.yaml") << "categories:\n  general:\n    limits:\n"
                                   "      ipv4_individual: { short: { rate: 1/s, burst: 5 } }\n";
  auto check =
      [&](const std::string& store) {
        std::ofstream(dir / "g.yaml")
            << "listeners: [{ name: public, address: 127.0.0.1, port: 8080 }]\n"
               "upstreams: { app: { endpoints: ['127.0.0.1:1'] } }\n"
               "default_route: { category: general, upstream: app }\n"
               "policies: [p.yaml]\n"
               "store: " +
                   store + "\n";
        std::string out;
        const int rc = run_with_input(
            {built("tollgate"), "--check-config", (dir / "g.yaml").string()}, "", out);
        return std::pair{rc, out};
      };
  ::unsetenv("TOLLGATE_TEST_UNSET_PASSWORD");
  auto [rc1, out1] = check(
      "{ type: redis, address: '127.0.0.1:6379', password_env: TOLLGATE_TEST_UNSET_PASSWORD }");
  CHECK(rc1 == 1);
  CHECK(out1.find("g.yaml: store.password_env: TOLLGATE_TEST_UNSET_PASSWORD is not set") !=
        std::string::npos);
  auto [rc2, out2] = check("{ type: redis, address: '127.0.0.1:6379', tls: { ca: missing.pem } }");
  CHECK(rc2 == 1);
  CHECK(out2.find("store.tls.ca: " + (dir / "missing.pem").string()) != std::string::npos);
  auto [rc3, out3] = check("{ type: redis, addresses: ['127.0.0.1:7000', '127.0.0.1:7001'] }");
  CHECK(rc3 == 0);
  CHECK(out3.find("ok") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("the keys of 100 000 addresses expire once their tats pass", "[redis][expiry]") {
  redis_server redis;
  echo_server echo;
  gateway gw(
      "listeners: [{ name: public, address: 127.0.0.1, port: 0 }]\n"
      "admin: { address: 127.0.0.1, port: 0 }\n"
      "workers: 2\n"
      "trusted_proxies: [127.0.0.1/32]\n"
      "upstreams: { app: { endpoints: ['{echo}'] } }\n"
      "default_route: { category: general, upstream: app }\n"
      "policies: ['{policy}']\n"
      "store: { type: redis, address: '127.0.0.1:" +
          std::to_string(redis.port) + "', timeout: 1s, fail_mode: closed }\n",
      // An address's tat lies 5 s ahead after its request (12/m, burst 1).
      "categories:\n  general:\n    limits:\n"
      "      ipv4_individual: { short: { rate: 12/m, burst: 1 } }\n"
      "      ipv4_network: { short: { rate: 100000/s, burst: 1000 } }\n",
      echo.port);
  require_degraded(gw, 0);
  // 100 connections of 1 000 pipelined requests, each from its own address in 10.0.0.0/8
  // (X-Forwarded-For from the trusted loopback): 100 000 /32 keys and 391 /24 keys.
  constexpr int connections = 100, per_connection = 1000;
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&, t] {
      for (int c = t; c < connections; c += 4) {
        std::string raw;
        for (int i = 0; i < per_connection; ++i) {
          const int n = c * per_connection + i;
          raw += "GET /x HTTP/1.1\r\nHost: t\r\nX-Forwarded-For: 10." + std::to_string(n >> 16) +
                 "." + std::to_string((n >> 8) & 255) + "." + std::to_string(n & 255) + "\r\n\r\n";
        }
        for (const auto& r : exchange(gw.port, raw, per_connection))
          ok += r.status == 200;
      }
    });
  }
  for (auto& c : clients)
    c.join();
  CHECK(ok == connections * per_connection);
  const long long peak = std::stoll(redis.cli({"dbsize"}));
  CHECK(peak > 10'000);
  // Every key carries its expiry (PXAT at its later tat): Redis removes them by itself.
  const auto start = std::chrono::steady_clock::now();
  long long left = peak;
  while (left > 0 && std::chrono::steady_clock::now() - start < std::chrono::seconds(60)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    left = std::stoll(redis.cli({"dbsize"}));
  }
  INFO("peak " << peak);
  CHECK(left == 0);
  CHECK(redis.cli({"info", "keyspace"}).find("expires=") == std::string::npos);
}
