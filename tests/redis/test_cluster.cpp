// The Redis store on a real 3-node Redis Cluster (Debian's redis-server, --cluster-enabled,
// made with redis-cli --cluster create): limits hold on every node, limits in other slots are
// refunded when another slot rejects, a resharding's MOVED is followed, and two replicas share
// a client's standing (docs/design.md §18) through the journal in its own slot.

#include <catch2/catch.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gateway/store/redis_wire.hpp"
#include "tests/integration/harness.hpp"
#include "tests/redis/support.hpp"

using namespace tollgate::test;
namespace redis = tollgate::store::redis;

namespace {

/// Three primaries, no replicas, slots 0-5460, 5461-10922 and 10923-16383 in that order.
struct cluster3 {
  static std::vector<std::string> args() {
    // The bus port explicitly (by default the port + 10000, which may be taken or past 65535).
    return {"--cluster-enabled",      "yes",  "--cluster-config-file", "nodes.conf",
            "--cluster-node-timeout", "3000", "--cluster-port",        std::to_string(free_port())};
  }
  redis_server a{args()}, b{args()}, c{args()};

  cluster3() {
    std::string out;
    const int rc = run_with_input(
        {"/usr/bin/redis-cli", "--cluster", "create", "127.0.0.1:" + std::to_string(a.port),
         "127.0.0.1:" + std::to_string(b.port), "127.0.0.1:" + std::to_string(c.port),
         "--cluster-replicas", "0", "--cluster-yes"},
        "", out);
    INFO(out);
    REQUIRE(rc == 0);
    for (redis_server* s : {&a, &b, &c}) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(15);
      while (s->cli({"cluster", "info"}).find("cluster_state:ok") == std::string::npos) {
        REQUIRE(std::chrono::steady_clock::now() < until);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
  }
  /// The node serving `slot` (as created).
  redis_server& serving(std::uint16_t slot) { return slot <= 5460 ? a : slot <= 10922 ? b : c; }
};

/// A /24 under 127.0.0.0/8 whose address keys (tag "{tg:127.X.Y.0/24}") hash to a slot for
/// which `want` holds; its first address.
std::string network_where(const std::function<bool(std::uint16_t)>& want, int skip = 0) {
  for (int x = 1; x < 256; ++x) {
    for (int y = 0; y < 256; ++y) {
      const std::string net = "127." + std::to_string(x) + "." + std::to_string(y) + ".";
      if (want(redis::key_slot("{tg:" + net + "0/24}")) && skip-- == 0) return net + "1";
    }
  }
  FAIL("no such network");
  return "";
}

/// Both routed categories: 5 per address, 1/m.
const std::string five_a_minute =
    "categories:\n"
    "  general:\n"
    "    limits:\n"
    "      ipv4_individual: { short: { rate: 1/m, burst: 5 } }\n"
    "  capped:\n"
    "    limits:\n"
    "      ipv4_individual: { short: { rate: 1/m, burst: 5 } }\n";

std::string gateway_yaml(std::uint16_t seed) {
  return "listeners: [{ name: public, address: 127.0.0.1, port: 0 }]\n"
         "admin: { address: 127.0.0.1, port: 0 }\n"
         "workers: 2\n"
         "upstreams: { app: { endpoints: ['{echo}'] } }\n"
         "routes: [{ match: { path_prefix: /capped }, category: capped, upstream: app }]\n"
         "default_route: { category: general, upstream: app }\n"
         "policies: ['{policy}']\n"
         "store: { type: redis, addresses: ['127.0.0.1:" +
         std::to_string(seed) + "'], timeout: 200ms, fail_mode: closed }\n";
}

/// Status codes of `n` requests from `source`, one connection each.
std::vector<int> statuses(const gateway& gw, const std::string& source, int n,
                          const std::string& extra = "") {
  std::vector<int> out;
  for (int i = 0; i < n; ++i)
    out.push_back(request(gw.port, get("/x", extra), source).status);
  return out;
}

int count_of(const std::vector<int>& v, int status) {
  return static_cast<int>(std::count(v.begin(), v.end(), status));
}

}  // namespace

TEST_CASE(
    "on a 3-node Redis Cluster every node's limits hold, and a rejection in one slot "
    "gives back what another slot took",
    "[redis][cluster]") {
  cluster3 cl;
  echo_server echo;
  gateway gw(gateway_yaml(cl.a.port),
             "categories:\n"
             "  general:\n"
             "    limits:\n"
             "      ipv4_individual: { short: { rate: 1/m, burst: 4 } }\n"
             "      ipv4_network: { short: { rate: 1/m, burst: 40 } }\n"
             "  capped:\n"
             "    limits:\n"
             "      ipv4_individual: { short: { rate: 1/m, burst: 5 } }\n"
             "      everyone: { key: global, short: { rate: 1/h, burst: 2 } }\n",
             echo.port);
  require_degraded(gw, 0);  // every worker has the slot map and its nodes

  // An address whose keys live on each node (the seed is only one of them): exactly the
  // burst, and the keys on that node.
  std::vector<std::string> sources = {
      network_where([](std::uint16_t s) { return s <= 5460; }),
      network_where([](std::uint16_t s) { return s > 5460 && s <= 10922; }),
      network_where([](std::uint16_t s) { return s > 10922; })};
  for (const std::string& src : sources) {
    CAPTURE(src);
    const auto got = statuses(gw, src, 6);
    CHECK(count_of(got, 200) == 4);
    CHECK(count_of(got, 429) == 2);
    const std::string net = src.substr(0, src.size() - 1) + "0/24";
    redis_server& home = cl.serving(redis::key_slot("{tg:" + net + "}"));
    CHECK(home.cli({"keys", "*"}).find("{tg:" + net + "}general/ipv4_individual/32:" + src) !=
          std::string::npos);
  }
  const std::string metrics = metrics_text(gw);
  CHECK(sample(metrics, "tollgate_store_decisions_total{source=\"closed\"}") == 0);
  CHECK(sample(metrics, "tollgate_store_decisions_total{source=\"redis\"}") >= 12);
}

TEST_CASE(
    "on Redis Cluster a global limit in another slot refunds the address levels it "
    "rejects",
    "[redis][cluster]") {
  cluster3 cl;
  echo_server echo;
  gateway gw(gateway_yaml(cl.b.port),
             "categories:\n"
             "  general:\n"
             "    limits:\n"
             "      ipv4_individual: { short: { rate: 1/m, burst: 5 } }\n"
             "  capped:\n"
             "    limits:\n"
             "      ipv4_individual: { short: { rate: 1/m, burst: 5 } }\n"
             "      everyone: { key: global, short: { rate: 1/h, burst: 2 } }\n",
             echo.port);
  require_degraded(gw, 0);  // every worker has the slot map and its nodes
  // The global limit's key and the client's address keys on different nodes.
  static std::uint16_t global_slot;
  global_slot = redis::key_slot("{tg:capped/everyone/global}");
  const std::string src = network_where([](std::uint16_t s) {
    return (s <= 5460) != (global_slot <= 5460) && (s > 10922) != (global_slot > 10922);
  });
  CAPTURE(src, global_slot);
  const std::string net = src.substr(0, src.size() - 1) + "0/24";
  redis_server& home = cl.serving(redis::key_slot("{tg:" + net + "}"));
  REQUIRE(&home != &cl.serving(global_slot));

  // Two admitted (the global burst), then the global limit rejects: the address level had
  // admitted and committed in its own slot, and is given back.
  std::vector<int> capped;
  for (int i = 0; i < 5; ++i)
    capped.push_back(request(gw.port, get("/capped"), src).status);
  CHECK(capped == std::vector<int>{200, 200, 429, 429, 429});
  // Two admissions at 1/m leave a tat about two minutes ahead; without the refund the third
  // request's commit would leave three.
  const std::string key = "{tg:" + net + "}capped/ipv4_individual/32:" + src;
  const long long pttl = std::stoll(home.cli({"pttl", key}));
  CHECK(pttl > 100'000);
  CHECK(pttl <= 120'001);
  // The global limit's state: two admissions at 1/h.
  const long long global_pttl =
      std::stoll(cl.serving(global_slot).cli({"pttl", "{tg:capped/everyone/global}"}));
  CHECK(global_pttl > 2 * 3600'000 - 60'000);
  CHECK(global_pttl <= 2 * 3600'000 + 1);
}

TEST_CASE("a resharding's MOVED is followed to the node that now serves the slot",
          "[redis][cluster]") {
  cluster3 cl;
  echo_server echo;
  gateway gw(gateway_yaml(cl.c.port), five_a_minute, echo.port);
  require_degraded(gw, 0);  // every worker has the slot map and its nodes
  // redis-cli --cluster reshard moves the lowest slots of the source first: an address whose
  // keys hash into slots 0-9 moves from a to b.
  const std::string src = network_where([](std::uint16_t s) { return s < 10; });
  const std::string net = src.substr(0, src.size() - 1) + "0/24";
  CAPTURE(src);
  CHECK(statuses(gw, src, 2) == std::vector<int>{200, 200});
  CHECK(cl.a.cli({"keys", "*"}).find(net) != std::string::npos);

  std::string out;
  const int rc = run_with_input(
      {"/usr/bin/redis-cli", "--cluster", "reshard", "127.0.0.1:" + std::to_string(cl.a.port),
       "--cluster-from", cl.a.cli({"cluster", "myid"}), "--cluster-to",
       cl.b.cli({"cluster", "myid"}), "--cluster-slots", "10", "--cluster-yes"},
      "", out);
  INFO(out);
  REQUIRE(rc == 0);
  REQUIRE(cl.b.cli({"keys", "*"}).find(net) != std::string::npos);

  // The gateway still sends the slot to a, which answers MOVED: followed, and the count goes
  // on from the migrated state (3 of 5 used after this one).
  const auto r = request(gw.port, get("/x"), src);
  CHECK(r.status == 200);
  CHECK(r.header("x-ratelimit-remaining") == "2");
  const std::string metrics = metrics_text(gw);
  CHECK(sample(metrics, "tollgate_store_errors_total{kind=\"redirect\"}") >= 1);
  CHECK(sample(metrics, "tollgate_store_decisions_total{source=\"closed\"}") == 0);
  CHECK(statuses(gw, src, 3) == std::vector<int>{200, 200, 429});
}

TEST_CASE("a slot being migrated answers ASK, followed with ASKING to the importing node",
          "[redis][cluster]") {
  cluster3 cl;
  echo_server echo;
  gateway gw(gateway_yaml(cl.a.port), five_a_minute, echo.port);
  require_degraded(gw, 0);
  // An address whose keys hash to a slot of node a, no key of it there yet; the slot is then
  // put in migration from a to b (as redis-cli --cluster reshard does before moving keys).
  const std::string src = network_where([](std::uint16_t s) { return s > 100 && s <= 5460; });
  const std::string net = src.substr(0, src.size() - 1) + "0/24";
  const std::uint16_t slot = redis::key_slot("{tg:" + net + "}");
  CAPTURE(src, slot);
  const std::string a_id = cl.a.cli({"cluster", "myid"});
  const std::string b_id = cl.b.cli({"cluster", "myid"});
  REQUIRE(cl.b.cli({"cluster", "setslot", std::to_string(slot), "importing", a_id}) == "OK");
  REQUIRE(cl.a.cli({"cluster", "setslot", std::to_string(slot), "migrating", b_id}) == "OK");

  // Node a no longer has the request's keys and answers ASK: the gateway asks b, with ASKING,
  // and b decides and stores them; the slot map is left as it was.
  const auto r = request(gw.port, get("/x"), src);
  CHECK(r.status == 200);
  CHECK(r.header("x-ratelimit-remaining") == "4");
  CHECK(cl.b.cli({"cluster", "countkeysinslot", std::to_string(slot)}) == "1");
  CHECK(cl.a.cli({"cluster", "countkeysinslot", std::to_string(slot)}) == "0");
  const std::string metrics = metrics_text(gw);
  CHECK(sample(metrics, "tollgate_store_errors_total{kind=\"redirect\"}") >= 1);
  CHECK(sample(metrics, "tollgate_store_decisions_total{source=\"closed\"}") == 0);
  // The next request is asked of a again (ASK does not move the slot) and follows again; the
  // count goes on in b.
  const auto r2 = request(gw.port, get("/x"), src);
  CHECK(r2.status == 200);
  CHECK(r2.header("x-ratelimit-remaining") == "3");
}

TEST_CASE("two replicas on a Cluster share bans, and a reset deletes keys on another node",
          "[redis][cluster][standing]") {
  cluster3 cl;
  echo_server echo;
  const std::string policy =
      five_a_minute +
      "violations:\n"
      "  abuse: { levels: [individual], ban: { threshold: 2, duration: 1h } }\n";
  // Seeded with different nodes: each finds the others through the slot map.
  gateway a(gateway_yaml(cl.a.port), policy, echo.port);
  gateway b(gateway_yaml(cl.c.port), policy, echo.port);
  require_degraded(a, 0);
  require_degraded(b, 0);
  const std::uint16_t journal_slot = redis::key_slot("{tg:standing}");
  redis_server& journal_node = cl.serving(journal_slot);
  auto admin = [](const gateway& gw, const std::string& method, const std::string& target) {
    return request(gw.admin_port,
                   method + " " + target + " HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n");
  };

  // Two violations, one through each replica: banned on both.
  const std::string banned = "127.250.0.9";
  CHECK(request(a.port, get("/x?violation=abuse"), banned).status == 200);
  CHECK(request(b.port, get("/x?violation=abuse"), banned).status == 200);
  CHECK(eventually([&] { return request(a.port, get("/x"), banned).status == 403; }));
  CHECK(eventually([&] { return request(b.port, get("/x"), banned).status == 403; }));
  CHECK(journal_node.cli({"type", "{tg:standing}"}) == "stream");

  // A client whose limiter keys live on another node than the journal's: its burst spent
  // across both replicas, then reset through B.
  const std::string client =
      network_where([&](std::uint16_t s) { return &cl.serving(s) != &journal_node; });
  CAPTURE(client);
  const std::string net = client.substr(0, client.size() - 1) + "0/24";
  const std::string key = "{tg:" + net + "}general/ipv4_individual/32:" + client;
  redis_server& home = cl.serving(redis::key_slot("{tg:" + net + "}"));
  REQUIRE(&home != &journal_node);
  CHECK(statuses(a, client, 3) == std::vector<int>{200, 200, 200});
  CHECK(statuses(b, client, 3) == std::vector<int>{200, 200, 429});
  CHECK(!home.cli({"get", key}).empty());
  const auto r = admin(b, "DELETE", "/admin/addresses/" + client);
  INFO(r.body);
  CHECK(r.status == 200);
  CHECK(r.body.find(R"("redis_keys_deleted":1)") != std::string::npos);
  CHECK(home.cli({"get", key}).empty());
  CHECK(eventually([&] { return request(a.port, get("/x"), client).status == 200; }));
  CHECK(statuses(b, client, 5) == std::vector<int>{200, 200, 200, 200, 429});
}
