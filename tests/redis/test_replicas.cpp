// Gateway processes sharing one Redis (docs/design.md §11): several real tollgate processes in
// front of one tollgate-echo, with `store: redis` on one Debian redis-server started by the test.
// What one replica admits, the others know: one burst per address, per network, per key, whatever
// the gateways' clocks say; keys are named as documented and expire; reloads, AUTH and TLS.

#include <unistd.h>
#include <catch2/catch.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/integration/harness.hpp"
#include "tests/redis/support.hpp"

using namespace tollgate::test;
using namespace std::chrono_literals;

namespace {

using clock_type = std::chrono::steady_clock;

/// A gateway started with `env` in its environment (and only its).
std::unique_ptr<gateway> start_gateway(
    const std::string& yaml, const std::string& policy, std::uint16_t echo,
    const std::vector<std::pair<std::string, std::string>>& env) {
  std::vector<std::unique_ptr<scoped_env>> set;
  for (const auto& [name, value] : env)
    set.push_back(std::make_unique<scoped_env>(name, value));
  return std::make_unique<gateway>(yaml, policy, echo);
}

/// One request of a concurrent run: to which gateway (index into the ports), what, from where.
struct job {
  std::size_t gw = 0;
  std::string raw;
  std::string source = "127.0.0.1";
};

/// What came back for a job (`error` when the exchange failed).
struct result {
  std::size_t gw = 0;
  response r;
  std::string error;
};

/// Runs `jobs` from `threads` client threads at once (released together), each job over a
/// new connection; results in the order of `jobs`.
std::vector<result> run_concurrently(const std::vector<std::uint16_t>& ports,
                                     const std::vector<job>& jobs, unsigned threads = 8) {
  std::vector<result> out(jobs.size());
  std::atomic<std::size_t> next{0};
  std::atomic<unsigned> waiting{threads};
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      waiting.fetch_sub(1);
      while (waiting.load() != 0)
        std::this_thread::yield();
      for (std::size_t i = next++; i < jobs.size(); i = next++) {
        out[i].gw = jobs[i].gw;
        try {
          out[i].r = request(ports[jobs[i].gw], jobs[i].raw, jobs[i].source);
        } catch (const std::exception& e) {
          out[i].error = e.what();
        }
      }
    });
  }
  for (auto& t : pool)
    t.join();
  return out;
}

/// The lines of `text` (redis-cli's answer to KEYS).
std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  for (const auto& x : v) {
    if (x == s) return true;
  }
  return false;
}

int retry_after(const response& r) {
  const std::string v = r.header("retry-after");
  return v.empty() ? -1 : std::stoi(v);
}

/// A folder of the test's own, removed at the end.
struct scratch_dir {
  explicit scratch_dir(const std::string& name) {
    static std::atomic<int> counter{0};
    path = std::filesystem::temp_directory_path() /
           ("tollgate-redis-" + name + "-" + std::to_string(getpid()) + "-" +
            std::to_string(counter++));
    std::filesystem::create_directories(path);
  }
  ~scratch_dir() { std::filesystem::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
  std::filesystem::path path;
};

/// Runs openssl with `args`; requires success.
void openssl(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"/usr/bin/openssl"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::string out;
  const int status = run_with_input(argv, "", out);
  INFO(out);
  REQUIRE(status == 0);
}

/// A throwaway CA (NAME-ca.pem, its key NAME-ca.key) in `dir`.
void make_ca(const scratch_dir& dir, const std::string& name) {
  openssl({"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
           "-days", "1", "-subj", "/CN=tollgate test " + name, "-keyout",
           dir.file(name + "-ca.key"), "-out", dir.file(name + "-ca.pem")});
}

/// A certificate NAME.pem (key NAME.key) signed by CA `ca`: for the server, 127.0.0.1 and
/// redis.test; for a client, a client certificate.
void make_certificate(const scratch_dir& dir, const std::string& name, const std::string& ca,
                      bool server) {
  openssl({"req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj",
           "/CN=" + name, "-keyout", dir.file(name + ".key"), "-out", dir.file(name + ".csr")});
  std::ofstream(dir.file(name + ".ext"))
      << (server ? "subjectAltName=IP:127.0.0.1,DNS:redis.test\nextendedKeyUsage=serverAuth\n"
                 : "extendedKeyUsage=clientAuth\n");
  openssl({"x509", "-req", "-in", dir.file(name + ".csr"), "-CA", dir.file(ca + "-ca.pem"),
           "-CAkey", dir.file(ca + "-ca.key"), "-CAcreateserial", "-days", "1", "-extfile",
           dir.file(name + ".ext"), "-out", dir.file(name + ".pem")});
}

}  // namespace

TEST_CASE("two replicas sharing one redis admit exactly one burst per address between them",
          "[redis][replicas]") {
  redis_server redis;
  echo_server echo;
  // 1/m: nothing refills during the test.
  const auto policy = policy_yaml("      ipv4_individual: { short: { rate: 1/m, burst: 5 } }\n");
  gateway a(redis_gateway_yaml(redis.port), policy, echo.port);
  gateway b(redis_gateway_yaml(redis.port), policy, echo.port);
  require_degraded(a, 0);
  require_degraded(b, 0);

  std::vector<job> jobs;
  for (std::size_t i = 0; i < 32; ++i)
    jobs.push_back({i % 2, get("/r/" + std::to_string(i))});
  const auto results = run_concurrently({a.port, b.port}, jobs);

  int admitted = 0, limited = 0;
  std::multiset<std::string> remaining;
  for (const auto& x : results) {
    INFO("gateway " << x.gw << ": " << x.error << " " << x.r.status << " " << x.r.body);
    REQUIRE(x.error.empty());
    CHECK(x.r.header("x-ratelimit-level") == "ipv4_individual");
    CHECK(x.r.header("x-ratelimit-limit") == "5");
    if (x.r.status == 200) {
      ++admitted;
      remaining.insert(x.r.header("x-ratelimit-remaining"));
    } else {
      CHECK(x.r.status == 429);
      ++limited;
      CHECK(x.r.header("x-ratelimit-remaining") == "0");
      CHECK(retry_after(x.r) >= 1);
      CHECK(retry_after(x.r) <= 60);
    }
  }
  CHECK(admitted == 5);
  CHECK(limited == 27);
  CHECK(remaining == std::multiset<std::string>{"0", "1", "2", "3", "4"});
  CHECK(echo.requests() == 5);
  // Every decision came from Redis or the over-limit cache: none by fail_mode.
  CHECK(decisions(a, "redis") + decisions(a, "cache") + decisions(b, "redis") +
            decisions(b, "cache") ==
        32);
  CHECK(decisions(a, "closed") + decisions(b, "closed") == 0);
  CHECK(decisions(a, "redis") >= 1);
  CHECK(decisions(b, "redis") >= 1);
  // Each Redis decision's latency is observed once.
  CHECK(metric(a, "tollgate_store_latency_seconds_count") == decisions(a, "redis"));
  CHECK(metric(b, "tollgate_store_latency_seconds_count") == decisions(b, "redis"));
}

TEST_CASE("under concurrency on pipelined links every address gets exactly its own burst",
          "[redis][replicas]") {
  redis_server redis;
  echo_server echo;
  const auto policy = policy_yaml("      ipv4_individual: { short: { rate: 1/h, burst: 7 } }\n");
  gateway a(redis_gateway_yaml(redis.port), policy, echo.port);
  gateway b(redis_gateway_yaml(redis.port), policy, echo.port);
  require_degraded(a, 0);
  require_degraded(b, 0);

  // 20 addresses x 16 requests, interleaved, over both replicas and both workers of each: a
  // reply matched to the wrong call would show as a wrong count or remaining for an address.
  constexpr std::size_t addresses = 20, each = 16;
  std::vector<job> jobs;
  for (std::size_t i = 0; i < addresses * each; ++i) {
    jobs.push_back({(i / addresses) % 2, get("/m/" + std::to_string(i)),
                    "127.0.0." + std::to_string(10 + i % addresses)});
  }
  const auto results = run_concurrently({a.port, b.port}, jobs, 12);
  std::map<std::string, std::multiset<std::string>> remaining;  // of the admitted, by address
  std::map<std::string, int> refused;
  for (std::size_t i = 0; i < results.size(); ++i) {
    const auto& x = results[i];
    INFO(jobs[i].source << " via gateway " << x.gw << ": " << x.error << " " << x.r.status);
    REQUIRE(x.error.empty());
    if (x.r.status == 200) {
      remaining[jobs[i].source].insert(x.r.header("x-ratelimit-remaining"));
    } else {
      CHECK(x.r.status == 429);
      ++refused[jobs[i].source];
    }
  }
  const std::multiset<std::string> burst = {"0", "1", "2", "3", "4", "5", "6"};
  CHECK(remaining.size() == addresses);
  for (const auto& [source, seen] : remaining) {
    INFO(source);
    CHECK(seen == burst);
    CHECK(refused[source] == static_cast<int>(each) - 7);
  }
  CHECK(echo.requests() == addresses * 7);
}

TEST_CASE("the network level aggregates the addresses of a /24 across replicas",
          "[redis][replicas]") {
  redis_server redis;
  echo_server echo;
  const auto policy = policy_yaml(
      "      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }\n"
      "      ipv4_network: { short: { rate: 1/m, burst: 6 } }\n");
  gateway a(redis_gateway_yaml(redis.port), policy, echo.port);
  gateway b(redis_gateway_yaml(redis.port), policy, echo.port);
  require_degraded(a, 0);
  require_degraded(b, 0);

  // Twelve addresses of 127.0.0.0/24, two requests each, spread over both replicas.
  std::vector<job> jobs;
  for (std::size_t i = 0; i < 24; ++i) {
    jobs.push_back({i % 2, get("/n/" + std::to_string(i)), "127.0.0." + std::to_string(2 + i / 2)});
  }
  const auto results = run_concurrently({a.port, b.port}, jobs);
  int admitted = 0;
  for (const auto& x : results) {
    INFO("gateway " << x.gw << ": " << x.error << " " << x.r.status << " " << x.r.body);
    REQUIRE(x.error.empty());
    if (x.r.status == 200) {
      ++admitted;
    } else {
      CHECK(x.r.status == 429);
      CHECK(x.r.header("x-ratelimit-level") == "ipv4_network");
      CHECK(x.r.body.find("\"level\":\"ipv4_network\"") != std::string::npos);
    }
  }
  CHECK(admitted == 6);
  CHECK(echo.requests() == 6);

  // Another /24 has a bucket of its own, on either replica.
  auto r = request(b.port, get("/other"), "127.0.1.2");
  CHECK(r.status == 200);
  CHECK(r.header("x-ratelimit-level") == "ipv4_network");
  CHECK(r.header("x-ratelimit-remaining") == "5");
  r = request(a.port, get("/other"), "127.0.1.3");
  CHECK(r.status == 200);
  CHECK(r.header("x-ratelimit-remaining") == "4");
}

TEST_CASE("replicas whose clocks differ by 14 s still admit one burst, with honest waits",
          "[redis][replicas]") {
  redis_server redis;
  echo_server echo;
  // T = 10 s, shorter than the clocks' difference: a limiter on the gateways' clocks would let
  // the replica ahead admit again at once, and tell the one behind to wait too long.
  const auto policy = policy_yaml("      ipv4_individual: { short: { rate: 6/m, burst: 5 } }\n");
  auto ahead = start_gateway(redis_gateway_yaml(redis.port), policy, echo.port,
                             {{"TOLLGATE_TEST_CLOCK_OFFSET_MS", "7000"}});
  auto behind = start_gateway(redis_gateway_yaml(redis.port), policy, echo.port,
                              {{"TOLLGATE_TEST_CLOCK_OFFSET_MS", "-7000"}});
  REQUIRE(std::getenv("TOLLGATE_TEST_CLOCK_OFFSET_MS") == nullptr);
  require_degraded(*ahead, 0);
  require_degraded(*behind, 0);

  const std::array<const gateway*, 2> gws = {ahead.get(), behind.get()};
  // Alternating, one at a time: the burst is admitted in order, whichever replica asks.
  for (int i = 0; i < 14; ++i) {
    const gateway& gw = *gws[static_cast<std::size_t>(i % 2)];
    const auto r = request(gw.port, get("/c/" + std::to_string(i)));
    INFO("request " << i << " to the replica " << (i % 2 == 0 ? "ahead" : "behind") << ": "
                    << r.status << " " << r.body);
    if (i < 5) {
      CHECK(r.status == 200);
      CHECK(r.header("x-ratelimit-remaining") == std::to_string(4 - i));
    } else {
      CHECK(r.status == 429);
      // The real wait is T = 10 s (less the little time since the burst).
      CHECK(retry_after(r) >= 1);
      CHECK(retry_after(r) <= 10);
      CHECK(r.body.find("\"retry_after\":" + r.header("retry-after")) != std::string::npos);
    }
  }
  CHECK(echo.requests() == 5);
}

TEST_CASE("a header-keyed limit is shared by replicas that share the PoW secret",
          "[redis][replicas]") {
  redis_server redis;
  echo_server echo;
  const auto policy = policy_yaml(
      "      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }\n"
      "      per_api_key: { key: { header: X-Api-Key }, short: { rate: 1/m, burst: 3 } }\n");
  const std::string secret = "replicas-share-this-secret-0123456789";
  auto a = start_gateway(redis_gateway_yaml(redis.port), policy, echo.port,
                         {{"TOLLGATE_POW_SECRET", secret}});
  auto b = start_gateway(redis_gateway_yaml(redis.port), policy, echo.port,
                         {{"TOLLGATE_POW_SECRET", secret}});
  require_degraded(*a, 0);
  require_degraded(*b, 0);

  // One key from eight addresses over both replicas: three pass in all.
  std::vector<job> jobs;
  for (std::size_t i = 0; i < 8; ++i) {
    jobs.push_back(
        {i % 2, get("/k", "X-Api-Key: key-shared-by-all\r\n"), "127.0.0." + std::to_string(2 + i)});
  }
  auto results = run_concurrently({a->port, b->port}, jobs, 4);
  int admitted = 0;
  for (const auto& x : results) {
    INFO("gateway " << x.gw << ": " << x.error << " " << x.r.status << " " << x.r.body);
    REQUIRE(x.error.empty());
    CHECK(x.r.header("x-ratelimit-level") == "per_api_key");
    if (x.r.status == 200) {
      ++admitted;
    } else {
      CHECK(x.r.status == 429);
    }
  }
  CHECK(admitted == 3);

  // In Redis the key is hashed: the value itself is nowhere in the key names.
  const auto keys = lines(redis.cli({"KEYS", "*"}));
  INFO(redis.cli({"KEYS", "*"}));
  bool found = false;
  for (const auto& k : keys) {
    CHECK(k.find("key-shared-by-all") == std::string::npos);
    if (k.rfind("{tg:general/per_api_key", 0) == 0) found = true;
  }
  CHECK(found);

  // Replicas with different secrets hash the same value differently: each has its own bucket.
  auto c = start_gateway(redis_gateway_yaml(redis.port), policy, echo.port,
                         {{"TOLLGATE_POW_SECRET", "one-secret-0123456789abcdef"}});
  auto d = start_gateway(redis_gateway_yaml(redis.port), policy, echo.port,
                         {{"TOLLGATE_POW_SECRET", "another-secret-0123456789ab"}});
  require_degraded(*c, 0);
  require_degraded(*d, 0);
  int admitted_c = 0, admitted_d = 0;
  for (int i = 0; i < 4; ++i) {
    admitted_c += request(c->port, get("/k", "X-Api-Key: key-two\r\n")).status == 200;
    admitted_d += request(d->port, get("/k", "X-Api-Key: key-two\r\n")).status == 200;
  }
  CHECK(admitted_c == 3);
  CHECK(admitted_d == 3);
}

TEST_CASE(
    "cost per route, a global limit and a shadowed limit work across replicas as in one "
    "process",
    "[redis][replicas]") {
  redis_server redis;
  echo_server echo;
  const std::string routes = R"(routes:
  - { match: { path: /export }, category: costly, upstream: app, cost: 5 }
  - { match: { path_prefix: /cheap }, category: costly, upstream: app }
  - { match: { path_prefix: /global }, category: everyone, upstream: app }
  - { match: { path_prefix: /mixed }, category: mixed, upstream: app }
)";
  const std::string policy = R"(
categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }
  costly:
    cost: 2
    limits:
      ipv4_individual: { short: { rate: 1/h, burst: 20 } }
  everyone:
    limits:
      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }
      all: { key: global, short: { rate: 1/h, burst: 4 } }
  mixed:
    limits:
      ipv4_individual: { short: { rate: 1/h, burst: 3 } }
      ipv4_network: { short: { rate: 1/h, burst: 2 }, shadow: true }
)";
  const auto yaml = redis_gateway_yaml(redis.port, "timeout: 1s, fail_mode: closed", 2, routes);
  gateway a(yaml, policy, echo.port);
  gateway b(yaml, policy, echo.port);
  require_degraded(a, 0);
  require_degraded(b, 0);
  const std::array<const gateway*, 2> gws = {&a, &b};

  SECTION("cost") {
    // Burst 20: /export takes 5, the rest of the category 2; a refusal shows the stored state
    // (cost > 1: a 429 may honestly say 3 remain). The same steps as with one process.
    struct step {
      const char* target;
      int status;
      const char* remaining;
    };
    const step steps[] = {{"/export", 200, "15"}, {"/cheap", 200, "13"}, {"/export", 200, "8"},
                          {"/export", 200, "3"},  {"/export", 429, "3"}, {"/cheap", 200, "1"},
                          {"/cheap", 429, "1"}};
    std::size_t i = 0;
    for (const auto& s : steps) {
      INFO("step " << i << " " << s.target << " via gateway " << i % 2);
      const auto r = request(gws[i++ % 2]->port, get(s.target));
      CHECK(r.status == s.status);
      CHECK(r.header("x-ratelimit-remaining") == s.remaining);
      CHECK(r.header("x-ratelimit-limit") == "20");
    }
    CHECK(echo.requests() == 5);
  }

  SECTION("global") {
    int admitted = 0;
    for (std::size_t i = 0; i < 8; ++i) {
      const auto r = request(gws[i % 2]->port, get("/global"), "127.0.0." + std::to_string(2 + i));
      INFO(i << ": " << r.status << " " << r.body);
      CHECK(r.header("x-ratelimit-level") == "all");
      if (r.status == 200) {
        ++admitted;
        CHECK(r.header("x-ratelimit-remaining") == std::to_string(4 - admitted));
      } else {
        CHECK(r.status == 429);
      }
    }
    CHECK(admitted == 4);
    const std::string listing = redis.cli({"KEYS", "*"});
    INFO(listing);
    CHECK(contains(lines(listing), "{tg:everyone/all/global}"));
  }

  SECTION("shadow") {
    const std::string announced = R"(["X-Tollgate-Shadow","ipv4_network.short"])";
    // 1 and 2: both limits allow; the enforced one binds.
    for (std::size_t i = 0; i < 2; ++i) {
      const auto r = request(gws[i]->port, get("/mixed"));
      CHECK(r.status == 200);
      CHECK(r.header("x-ratelimit-level") == "ipv4_individual");
      CHECK(r.header("x-ratelimit-remaining") == std::to_string(2 - i));
      CHECK(r.body.find("X-Tollgate-Shadow") == std::string::npos);
    }
    // 3: the shadowed network limit would refuse: forwarded, announced upstream only.
    auto r = request(a.port, get("/mixed"));
    CHECK(r.status == 200);
    CHECK(r.body.find(announced) != std::string::npos);
    CHECK(r.header("x-ratelimit-remaining") == "0");
    CHECK(r.header("retry-after").empty());
    // 4: the enforced limit was committed by request 3, on the other replica.
    r = request(b.port, get("/mixed"));
    CHECK(r.status == 429);
    CHECK(r.header("x-ratelimit-level") == "ipv4_individual");
    CHECK(echo.requests() == 3);
  }
}

TEST_CASE("redis keys carry the documented names and expire when their tat passes",
          "[redis][replicas]") {
  redis_server redis;
  echo_server echo;
  // The individual keys' tat ends 2 s ahead; the network keys' 1 s per request (3 s for
  // tg:, 2 s for app7:).
  const auto policy = policy_yaml(
      "      ipv4_individual: { short: { rate: 1/s, burst: 2 } }\n"
      "      ipv4_network: { short: { rate: 2/s, burst: 20 } }\n");
  gateway a(redis_gateway_yaml(redis.port), policy, echo.port);
  gateway custom(
      redis_gateway_yaml(redis.port, "timeout: 1s, fail_mode: closed, key_prefix: \"app7:\""),
      policy, echo.port);
  require_degraded(a, 0);
  require_degraded(custom, 0);
  REQUIRE(redis.cli({"DBSIZE"}) == "0");

  for (const std::string source : {"127.0.0.1", "127.0.0.2", "127.0.0.3"}) {
    CHECK(request(a.port, get("/e"), source).status == 200);
    CHECK(request(a.port, get("/e"), source).status == 200);
    CHECK(request(a.port, get("/e"), source).status == 429);
  }
  for (const std::string source : {"127.0.0.4", "127.0.0.5"}) {
    CHECK(request(custom.port, get("/e"), source).status == 200);
    CHECK(request(custom.port, get("/e"), source).status == 200);
  }

  const std::string listing = redis.cli({"KEYS", "*"});
  INFO(listing);
  const auto keys = lines(listing);
  CHECK(keys.size() == 7);
  CHECK(contains(keys, "{tg:127.0.0.0/24}general/ipv4_individual/32:127.0.0.1"));
  CHECK(contains(keys, "{tg:127.0.0.0/24}general/ipv4_individual/32:127.0.0.2"));
  CHECK(contains(keys, "{tg:127.0.0.0/24}general/ipv4_individual/32:127.0.0.3"));
  CHECK(contains(keys, "{tg:127.0.0.0/24}general/ipv4_network/24:127.0.0.0"));
  CHECK(contains(keys, "{app7:127.0.0.0/24}general/ipv4_individual/32:127.0.0.4"));
  CHECK(contains(keys, "{app7:127.0.0.0/24}general/ipv4_individual/32:127.0.0.5"));
  CHECK(contains(keys, "{app7:127.0.0.0/24}general/ipv4_network/24:127.0.0.0"));
  // Every key expires, no later than its tat (at most 3 s ahead).
  for (const auto& k : keys) {
    const std::string ttl = redis.cli({"PTTL", k});
    INFO(k << ": PTTL " << ttl);
    const long long ms = std::stoll(ttl);
    // -2: expired meanwhile (this machine is slow); fine. -1 (no expiry) is not.
    CHECK(ms != -1);
    CHECK(ms <= 3100);
  }
  // ... and not before it: the network key's tat is 3 s ahead.
  const long long network_ttl =
      std::stoll(redis.cli({"PTTL", "{tg:127.0.0.0/24}general/ipv4_network/24:127.0.0.0"}));
  CHECK(network_ttl > 1500);
  // ... and they are gone once it has passed.
  std::string size;
  CHECK(eventually([&] { return (size = redis.cli({"DBSIZE"})) == "0"; }, 8s));
  INFO("DBSIZE " << size);
  // With their keys gone, the buckets are full again.
  const auto r = request(a.port, get("/e"), "127.0.0.1");
  CHECK(r.status == 200);
  CHECK(r.header("x-ratelimit-remaining") == "1");
}

TEST_CASE(
    "a reload changes the limits against the same redis, a new key_prefix waits for a "
    "restart",
    "[redis][replicas]") {
  redis_server redis;
  echo_server echo;
  const auto v1 = policy_yaml("      ipv4_individual: { short: { rate: 1/m, burst: 2 } }\n");
  const auto v2 = policy_yaml("      ipv4_individual: { short: { rate: 1/m, burst: 5 } }\n");
  const auto yaml = redis_gateway_yaml(redis.port);
  gateway gw(yaml, v1, echo.port);
  require_degraded(gw, 0);

  CHECK(request(gw.port, get("/a"), "127.0.0.2").status == 200);
  CHECK(request(gw.port, get("/a"), "127.0.0.2").status == 200);
  CHECK(request(gw.port, get("/a"), "127.0.0.2").status == 429);

  // The burst goes from 2 to 5: with the state Redis holds, three more for 127.0.0.2.
  std::string line = gw.reload(yaml, v2);
  INFO(line);
  REQUIRE(line.find("in force") != std::string::npos);
  for (int i = 0; i < 3; ++i) {
    const auto r = request(gw.port, get("/b"), "127.0.0.2");
    INFO(i << ": " << r.status << " " << r.body);
    CHECK(r.status == 200);
    CHECK(r.header("x-ratelimit-limit") == "5");
    CHECK(r.header("x-ratelimit-remaining") == std::to_string(2 - i));
  }
  CHECK(request(gw.port, get("/b"), "127.0.0.2").status == 429);
  const double from_redis = decisions(gw, "redis");
  CHECK(from_redis >= 7);

  // A new key_prefix is restart-only: it is named, and the running one stays.
  const auto before = gw.process->output().size();
  line = gw.reload(
      redis_gateway_yaml(redis.port, "timeout: 1s, fail_mode: closed, key_prefix: \"new:\""), v2);
  if (line.find("in force") == std::string::npos) gw.process->wait_for_line("in force");
  const std::string log = gw.process->output().substr(before);
  INFO(log);
  CHECK(log.find("reload: store.key_prefix changed; takes effect at restart") != std::string::npos);
  const auto r = request(gw.port, get("/c"), "127.0.0.9");
  CHECK(r.status == 200);
  CHECK(r.header("x-ratelimit-remaining") == "4");
  CHECK(decisions(gw, "redis") > from_redis);
  const std::string listing = redis.cli({"KEYS", "*"});
  INFO(listing);
  const auto keys = lines(listing);
  CHECK(contains(keys, "{tg:127.0.0.0/24}general/ipv4_individual/32:127.0.0.9"));
  for (const auto& k : keys)
    CHECK(k.find("new:") == std::string::npos);
  CHECK(metric(gw, "tollgate_store_degraded") == 0);
}

TEST_CASE(
    "a password from password_env authenticates to redis, a wrong one lets fail_mode "
    "decide, an unset variable stops the start",
    "[redis][replicas]") {
  redis_server redis({"--requirepass", "s3cret"});
  echo_server echo;
  const auto policy = policy_yaml("      ipv4_individual: { short: { rate: 1/m, burst: 5 } }\n");
  const auto yaml = redis_gateway_yaml(
      redis.port, "timeout: 1s, fail_mode: closed, password_env: TOLLGATE_TEST_REDIS_PASSWORD");

  {
    auto gw = start_gateway(yaml, policy, echo.port, {{"TOLLGATE_TEST_REDIS_PASSWORD", "s3cret"}});
    require_degraded(*gw, 0);
    const auto r = request(gw->port, get("/p"));
    CHECK(r.status == 200);
    CHECK(r.header("x-ratelimit-remaining") == "4");
    CHECK(decisions(*gw, "redis") == 1);
    CHECK(redis.cli({"DBSIZE"}) == "1");
  }

  {
    auto gw = start_gateway(yaml, policy, echo.port,
                            {{"TOLLGATE_TEST_REDIS_PASSWORD", "not-the-pass-x9"}});
    const std::string line = gw->process->wait_for_line("cannot use redis");
    INFO(line);
    CHECK(line.find("AUTH") != std::string::npos);
    CHECK(line.find("fail_mode closed decides") != std::string::npos);
    // The password is never logged.
    CHECK(gw->process->output().find("not-the-pass-x9") == std::string::npos);
    CHECK(metric(*gw, "tollgate_store_degraded") == 1);
    const auto r = request(gw->port, get("/p"));
    CHECK(r.status == 503);
    CHECK(r.header("content-type") == "application/problem+json");
    CHECK(r.body.find("\"code\":\"store_unavailable\"") != std::string::npos);
    CHECK(decisions(*gw, "closed") >= 1);
    const auto ready = request(gw->admin_port, get("/readyz"));
    CHECK(ready.status == 503);
    CHECK(ready.body == "store degraded: redis unreachable, fail_mode closed\n");
    CHECK(request(gw->admin_port, get("/healthz")).status == 200);
    CHECK(redis.cli({"DBSIZE"}) == "1");
  }

  {
    // An ACL user of its own: AUTH with username and password.
    CHECK(redis.cli({"ACL", "SETUSER", "tollgate", "on", ">user-pass-7", "~*", "+@all"}) == "OK");
    auto gw = start_gateway(
        redis_gateway_yaml(redis.port,
                           "timeout: 1s, fail_mode: closed, username: tollgate, password_env: "
                           "TOLLGATE_TEST_REDIS_PASSWORD"),
        policy, echo.port, {{"TOLLGATE_TEST_REDIS_PASSWORD", "user-pass-7"}});
    require_degraded(*gw, 0);
    const auto r = request(gw->port, get("/p"));
    CHECK(r.status == 200);
    CHECK(r.header("x-ratelimit-remaining") == "3");
    CHECK(decisions(*gw, "redis") == 1);
  }

  {
    REQUIRE(std::getenv("TOLLGATE_TEST_REDIS_PASSWORD") == nullptr);
    scratch_dir dir("password");
    std::string g = yaml;
    const auto put = [&](const std::string& from, const std::string& to) {
      const auto at = g.find(from);
      REQUIRE(at != std::string::npos);
      g.replace(at, from.size(), to);
    };
    put("{policy}", dir.file("policy.yaml"));
    put("{echo}", "127.0.0.1:" + std::to_string(echo.port));
    std::ofstream(dir.file("policy.yaml")) << policy;
    std::ofstream(dir.file("gateway.yaml")) << g;
    std::string out;
    const int status =
        run_with_input({built("tollgate"), "--config", dir.file("gateway.yaml")}, "", out);
    INFO(out);
    CHECK(status != 0);
    CHECK(out.find("store.password_env") != std::string::npos);
    CHECK(out.find("TOLLGATE_TEST_REDIS_PASSWORD") != std::string::npos);
    CHECK(out.find("listening on public") == std::string::npos);
  }
}

TEST_CASE(
    "decisions go to redis over TLS, with a client certificate when asked, a server "
    "certificate the CA did not sign, or for another name, is refused",
    "[redis][replicas]") {
  scratch_dir dir("tls");
  make_ca(dir, "good");
  make_ca(dir, "other");
  make_certificate(dir, "server", "good", true);
  make_certificate(dir, "client", "good", false);
  const std::uint16_t tls_port = free_port();
  // The plain port stays too, for redis-cli.
  redis_server redis({"--tls-port", std::to_string(tls_port), "--tls-cert-file",
                      dir.file("server.pem"), "--tls-key-file", dir.file("server.key"),
                      "--tls-ca-cert-file", dir.file("good-ca.pem"), "--tls-auth-clients", "no"});
  echo_server echo;
  const auto policy = policy_yaml("      ipv4_individual: { short: { rate: 1/m, burst: 5 } }\n");
  const auto tls_yaml = [&](const std::string& ca, const std::string& server_name) {
    return redis_gateway_yaml(tls_port, "timeout: 1s, fail_mode: closed, tls: { ca: " +
                                            dir.file(ca) + ", server_name: " + server_name + " }");
  };

  {
    gateway gw(tls_yaml("good-ca.pem", "redis.test"), policy, echo.port);
    require_degraded(gw, 0);
    const auto r = request(gw.port, get("/t"));
    CHECK(r.status == 200);
    CHECK(r.header("x-ratelimit-remaining") == "4");
    CHECK(decisions(gw, "redis") == 1);
    CHECK(redis.cli({"KEYS", "*"}) == "{tg:127.0.0.0/24}general/ipv4_individual/32:127.0.0.1");
  }

  // Signed by another CA, or not for the name asked for: no connection, fail_mode decides.
  for (const auto& [ca, name] : {std::pair<std::string, std::string>{"other-ca.pem", "redis.test"},
                                 {"good-ca.pem", "elsewhere.test"}}) {
    INFO(ca << ", server_name " << name);
    gateway gw(tls_yaml(ca, name), policy, echo.port);
    const std::string line = gw.process->wait_for_line("cannot use redis");
    INFO(line);
    CHECK(line.find("TLS handshake") != std::string::npos);
    CHECK(metric(gw, "tollgate_store_degraded") == 1);
    const auto r = request(gw.port, get("/t"));
    CHECK(r.status == 503);
    CHECK(r.body.find("\"code\":\"store_unavailable\"") != std::string::npos);
    CHECK(decisions(gw, "redis") == 0);
    CHECK(store_errors(gw, "connect") >= 1);
  }

  // A Redis that asks clients for a certificate: the gateway's (certificate, private_key).
  const std::uint16_t mutual_port = free_port();
  redis_server mutual({"--tls-port", std::to_string(mutual_port), "--tls-cert-file",
                       dir.file("server.pem"), "--tls-key-file", dir.file("server.key"),
                       "--tls-ca-cert-file", dir.file("good-ca.pem"), "--tls-auth-clients", "yes"});
  {
    gateway gw(redis_gateway_yaml(
                   mutual_port,
                   "timeout: 1s, fail_mode: closed, tls: { ca: " + dir.file("good-ca.pem") +
                       ", certificate: " + dir.file("client.pem") +
                       ", private_key: " + dir.file("client.key") + ", server_name: redis.test }"),
               policy, echo.port);
    require_degraded(gw, 0);
    CHECK(request(gw.port, get("/t")).status == 200);
    CHECK(decisions(gw, "redis") == 1);
    CHECK(mutual.cli({"DBSIZE"}) == "1");
  }
  {
    // Without one, Redis ends the handshake.
    gateway gw(redis_gateway_yaml(mutual_port, "timeout: 1s, fail_mode: closed, tls: { ca: " +
                                                   dir.file("good-ca.pem") +
                                                   ", server_name: redis.test }"),
               policy, echo.port);
    const std::string line = gw.process->wait_for_line("cannot use redis");
    INFO(line);
    CHECK(line.find("127.0.0.1:" + std::to_string(mutual_port)) != std::string::npos);
    CHECK(metric(gw, "tollgate_store_degraded") == 1);
    CHECK(request(gw.port, get("/t")).status == 503);
    CHECK(decisions(gw, "redis") == 0);
  }
}
