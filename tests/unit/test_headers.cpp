#include <catch2/catch.hpp>

#include "gateway/limit/headers.hpp"
#include "gateway/limit/memory_store.hpp"
#include "support.hpp"

using namespace tollgate;
using namespace tollgate::limit;
using namespace tollgate::test;

TEST_CASE("RateLimit-Policy lists every configured tier with q and w", "[headers]") {
  const limit_spec fine = group(params(2, sec, 5), params(30, 3600 * sec, 30), 1);
  const limit_spec coarse = group(params(10, sec, 25), {}, 2, level::ipv4_network);
  const limit_spec shadowed = keyed("everyone", key_source::global, params(1, sec, 9), 3, true);
  const limit_spec* limits[] = {&fine, &coarse, &shadowed};
  // A shadowed limit is left out: the client sees nothing of it.
  CHECK(policy_field(limits, 0) ==
        "\"ipv4_individual.short\";q=5;w=3, \"ipv4_individual.long\";q=30;w=3600, "
        "\"ipv4_network.short\";q=25;w=3");
}

TEST_CASE("header values of an admitted and a rejected request", "[headers]") {
  memory_store store({}, 1);
  const limit_spec g = group(params(2, sec, 5), params(30, 3600 * sec, 30), 1);
  // Half a second into a Unix second, so reset rounding is visible.
  const nanos now = 1'735'000'000 * sec + 500 * ms;
  auto req = ipv4_request("192.0.2.1", &g, nullptr, now);
  decision d = store.decide(req);
  binding_view b = binding_of(req, d);
  // After one request: short has 4 left, long 29: short binds.
  CHECK(b.name == "ipv4_individual");
  CHECK(b.which == tier::short_term);
  CHECK(b.burst == 5u);
  CHECK(b.remaining == 4);
  CHECK(b.reset == now + 500 * ms);
  CHECK(reset_unix_seconds(b) == 1'735'000'001);
  std::string field;
  append_ratelimit_field(field, b, now);
  CHECK(field == "\"ipv4_individual.short\";r=4;t=1");

  for (int i = 0; i < 4; ++i)
    store.decide(req);
  d = store.decide(req);
  REQUIRE_FALSE(d.admitted);
  b = binding_of(req, d);
  CHECK(b.remaining == 0);
  CHECK(b.wait == 500 * ms);
  CHECK(retry_after_seconds(b.wait) == 1);
  CHECK(rejection_reason(b.which) == "burst_exhausted");
  std::string name;
  append_limit_name(name, b);
  CHECK(name == "ipv4_individual.short");
  CHECK(reset_unix_seconds(b) == 1'735'000'003);  // tat = now + 2.5s
  field.clear();
  append_ratelimit_field(field, b, now);
  CHECK(field == "\"ipv4_individual.short\";r=0;t=3");
}
