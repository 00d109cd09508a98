// Calendar quotas in the Redis script, on a real redis-server: the same requests at the same
// instants (the script's test-only "now") decided as the in-process store decides them, the
// counts kept exactly across midnight and in batches, the key expiring at its window's end, and
// a Cluster refund giving a count back.

#include <hiredis/hiredis.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "gateway/config/policy.hpp"
#include "gateway/core/calendar.hpp"
#include "gateway/limit/headers.hpp"
#include "gateway/limit/memory_store.hpp"
#include "gateway/policy/compiled_policy.hpp"
#include "gateway/store/redis_wire.hpp"
#include "tests/integration/harness.hpp"
#include "tests/redis/support.hpp"
#include "tests/unit/keys_support.hpp"

using namespace tollgate;
using namespace tollgate::test;
namespace redis = tollgate::store::redis;
using core::nanos;

namespace {

constexpr nanos sec = core::ns_per_s;

struct context_free {
  void operator()(redisContext* c) const noexcept { redisFree(c); }
};
struct reply_free {
  void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
};
using reply_ptr = std::unique_ptr<redisReply, reply_free>;

/// A blocking connection with both scripts loaded.
class client {
 public:
  explicit client(std::uint16_t port) : c_(redisConnect("127.0.0.1", port)) {
    REQUIRE(c_);
    REQUIRE(c_->err == 0);
    for (const auto& [text, sha] : {std::pair{redis::gcra_script(), redis::gcra_sha()},
                                    {redis::refund_script(), redis::refund_sha()}}) {
      reply_ptr r(static_cast<redisReply*>(
          redisCommand(c_.get(), "SCRIPT LOAD %b", text.data(), text.size())));
      REQUIRE(r);
      REQUIRE(std::string(r->str, r->len) == sha);
    }
  }

  /// The reply of the script deciding `batch` at its first request's now ("" for Redis's).
  reply_ptr call(const std::vector<redis::batch_entry>& batch, bool redis_time = false) {
    redis::command_args a;
    const std::string now = redis_time ? "" : std::to_string(batch.front().req->now);
    redis::build_call(a, "EVALSHA", redis::gcra_sha(), "t:", batch, now);
    return run(a);
  }
  /// The script's decision of one request.
  limit::decision decide(const limit::limit_request& req, bool redis_time = false,
                         redis::script_reply* raw = nullptr) {
    auto r = call({{&req}}, redis_time);
    INFO((r->type == REDIS_REPLY_ERROR ? std::string(r->str, r->len) : std::string()));
    redis::script_reply sr;
    REQUIRE(redis::read_reply(*r, req, redis::all_groups, sr));
    if (raw != nullptr) *raw = sr;
    limit::decision d;
    redis::assemble(req, sr, sr.admitted, sr.shadow_limited, d);
    return d;
  }
  reply_ptr run(const redis::command_args& a) {
    reply_ptr r(static_cast<redisReply*>(redisCommandArgv(
        c_.get(), a.count, const_cast<const char**>(a.argv.data()), a.lengths.data())));
    REQUIRE(r);
    return r;
  }
  reply_ptr command(const char* format, const std::string& arg) {
    return reply_ptr(static_cast<redisReply*>(redisCommand(c_.get(), format, arg.c_str())));
  }

 private:
  std::unique_ptr<redisContext, context_free> c_;
};

/// A compiled category `api` with `limits`, asked for one API key.
struct policy_under_test {
  config::policy_config cfg;
  policy::compiled_policy compiled;
  const policy::category_limits& api;
  fake_request with_key;
  std::uint32_t unkeyed = 0;

  explicit policy_under_test(const std::string& limits)
      : cfg(config::load_policy_text("categories:\n  api:\n    limits:\n" + limits, "p.yaml")),
        compiled(cfg, {}),
        api(*compiled.find("api")) {
    with_key.headers["x-api-key"] = "k-1";
  }
  limit::limit_request request(nanos now, std::uint32_t cost = 1,
                               const char* address = "198.51.100.7") {
    const auto a = core::address::parse(address).value();
    return compiled.request(api, a, with_key.keys(), cost, now, unkeyed);
  }
};

/// A UTC midnight at least two days ahead of the real clock: instants around it lie in Redis's
/// future, so keys written at them (PXAT) do not expire at once.
nanos future_midnight() {
  const nanos real = std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  return core::window_of(core::period::day, real + 3 * 86400 * sec).start;
}

/// Every value a client could see of two decisions must agree.
void require_same(const limit::limit_request& req, const limit::decision& local,
                  const limit::decision& script) {
  REQUIRE(script.admitted == local.admitted);
  REQUIRE(script.shadow_limited == local.shadow_limited);
  REQUIRE(script.count == local.count);
  for (std::uint8_t i = 0; i < local.count; ++i) {
    CAPTURE(i);
    CHECK(script.limits[i].group == local.limits[i].group);
    CHECK(script.limits[i].tat == local.limits[i].tat);
    CHECK(script.limits[i].wait == local.limits[i].wait);
    CHECK(script.limits[i].used == local.limits[i].used);
  }
  REQUIRE(script.binding == local.binding);
  if (local.binding != limit::no_binding) {
    const auto a = limit::binding_of(req, local), b = limit::binding_of(req, script);
    CHECK(a.remaining == b.remaining);
    CHECK(limit::reset_unix_seconds(a) == limit::reset_unix_seconds(b));
    CHECK(limit::rejection_reason(a) == limit::rejection_reason(b));
  }
}

/// The Redis key of group `g` of `req`.
std::string key_of(const limit::limit_request& req, std::uint8_t g) {
  std::string k;
  redis::append_key(k, "t:", req, g);
  return k;
}

}  // namespace

TEST_CASE("the script keeps quotas as the in-process store does, across midnight",
          "[redis][script][quota]") {
  redis_server server;
  client c(server.port);
  limit::memory_store local({}, 1, 1);
  policy_under_test p(
      "      ipv4_individual: { short: { rate: 1/s, burst: 3 } }\n"
      "      daily: { key: { header: X-Api-Key }, quota: { limit: 5, period: day } }\n"
      "      per_network: { key: network, quota: { limit: 20, period: week } }\n"
      "      trial: { key: global, quota: { limit: 2, period: month }, shadow: true }\n");
  const nanos midnight = future_midnight();
  struct step {
    nanos at;  // from midnight
    std::uint32_t cost;
  };
  // The rate limit refuses (no quota spent), costs of 2, the quota refuses (the rate limit not
  // charged), the shadowed quota over its limit, then midnight.
  const std::vector<step> steps = {{-20 * sec, 1}, {-20 * sec, 1}, {-20 * sec, 1}, {-20 * sec, 1},
                                   {-10 * sec, 2}, {-10 * sec, 2}, {-5 * sec, 1},  {-5 * sec, 1},
                                   {-1, 1},        {0, 1},         {0, 3},         {0, 2},
                                   {sec, 1},       {5 * sec, 1}};
  for (const step& s : steps) {
    CAPTURE(s.at, s.cost);
    const auto req = p.request(midnight + s.at, s.cost);
    require_same(req, local.decide(req), c.decide(req));
  }
}

TEST_CASE("a quota's key holds its count and expires at its window's end",
          "[redis][script][quota]") {
  redis_server server;
  client c(server.port);
  policy_under_test p(
      "      monthly: { key: { header: X-Api-Key }, quota: { limit: 100, period: month } }\n");
  const nanos midnight = future_midnight();
  const nanos now = midnight + 3600 * sec + 123 * core::ns_per_ms;
  const nanos end = core::window_of(core::period::month, now).end;
  auto req = p.request(now, 7);
  REQUIRE(c.decide(req).admitted);
  const std::string key = key_of(req, 0);
  auto v = c.command("GET %s", key);
  REQUIRE(v->type == REDIS_REPLY_STRING);
  CHECK(std::string(v->str, v->len) == "q" + std::to_string(end / sec) + " 7");
  auto expiry = c.command("PEXPIRETIME %s", key);
  REQUIRE(expiry->type == REDIS_REPLY_INTEGER);
  CHECK(expiry->integer == end / core::ns_per_ms);

  // On Redis's own clock (the gateway's now being the real one): the same end, give or take
  // the moment between reading the two clocks.
  policy_under_test daily(
      "      daily: { key: { header: X-Api-Key }, quota: { limit: 100, period: day } }\n");
  const nanos real = std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  req = daily.request(real);
  redis::script_reply raw;
  const auto d = c.decide(req, true, &raw);
  REQUIRE(d.admitted);
  CHECK(d.limits[0].used == 1);
  CHECK(d.limits[0].tat == core::window_of(core::period::day, real).end);
  expiry = c.command("PEXPIRETIME %s", key_of(req, 0));
  const nanos day_end_ms = core::window_of(core::period::day, real).end / core::ns_per_ms;
  CHECK(expiry->integer >= day_end_ms - 1000);
  CHECK(expiry->integer <= day_end_ms + 1000);
}

TEST_CASE("a batch counts every request of a quota, all or nothing each",
          "[redis][script][quota]") {
  redis_server server;
  client c(server.port);
  policy_under_test p(
      "      ipv4_individual: { short: { rate: 1/m, burst: 4 } }\n"
      "      daily: { key: { header: X-Api-Key }, quota: { limit: 6, period: day } }\n");
  const nanos now = future_midnight() + 60 * sec;
  // Two clients share the key: the first's burst (4) ends before the quota does, so its
  // fifth request spends no quota; the second's take the rest, and two are refused by it.
  std::vector<limit::limit_request> reqs;
  for (int i = 0; i < 5; ++i)
    reqs.push_back(p.request(now, 1, "198.51.100.7"));
  for (int i = 0; i < 4; ++i)
    reqs.push_back(p.request(now, 1, "203.0.113.9"));
  std::vector<redis::batch_entry> batch;
  for (const auto& r : reqs)
    batch.push_back({&r});
  const auto reply = c.call(batch);
  nanos redis_now = 0;
  REQUIRE(redis::read_now(*reply, batch, redis_now));
  std::size_t at = 2;
  std::vector<bool> admitted;
  std::vector<std::uint32_t> used;
  for (const auto& e : batch) {
    redis::script_reply sr;
    REQUIRE(redis::read_entry(*reply, at, e, sr));
    admitted.push_back(sr.admitted);
    used.push_back(sr.tiers[1][0].used);
  }
  CHECK(admitted == std::vector<bool>{true, true, true, true, false, true, true, false, false});
  // A request another limit refused is told what the quota would have counted (nothing kept).
  CHECK(used == std::vector<std::uint32_t>{1, 2, 3, 4, 5, 5, 6, 6, 6});
  auto v = c.command("GET %s", key_of(reqs[0], 1));
  CHECK(std::string(v->str, v->len) ==
        "q" + std::to_string(core::window_of(core::period::day, now).end / sec) + " 6");
}

TEST_CASE("a Cluster refund gives a quota's count back, keeping the expiry",
          "[redis][script][quota]") {
  redis_server server;
  client c(server.port);
  policy_under_test p(
      "      daily: { key: { header: X-Api-Key }, quota: { limit: 10, period: day } }\n");
  const nanos now = future_midnight() + 7 * sec;
  redis::script_reply raw;
  REQUIRE(c.decide(p.request(now, 3)).admitted);
  const auto req = p.request(now, 2);
  REQUIRE(c.decide(req, false, &raw).admitted);
  const std::string key = key_of(req, 0);
  const auto before = c.command("PEXPIRETIME %s", key)->integer;
  redis::command_args a;
  redis::build_refund(a, "t:", req, 1, raw);
  c.run(a);
  auto v = c.command("GET %s", key);
  CHECK(std::string(v->str, v->len) ==
        "q" + std::to_string(core::window_of(core::period::day, now).end / sec) + " 3");
  CHECK(c.command("PEXPIRETIME %s", key)->integer == before);
}
