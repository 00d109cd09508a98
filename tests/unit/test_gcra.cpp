#include <catch2/catch.hpp>

#include "gateway/limit/gcra.hpp"
#include "gateway/limit/headers.hpp"
#include "gateway/limit/memory_store.hpp"
#include "support.hpp"

using namespace tollgate;
using namespace tollgate::limit;
using namespace tollgate::test;

TEST_CASE("params follow T = period / rate and tau = T * (burst - 1)", "[gcra]") {
  const auto p = params(2, sec, 5);
  CHECK(p.emission == 500 * ms);
  CHECK(p.tolerance == 2 * sec);
  CHECK(p.burst == 5u);
  const auto hourly = params(30, 3600 * sec, 30);
  CHECK(hourly.emission == 120 * sec);
  CHECK(hourly.tolerance == 29 * 120 * sec);
  CHECK(gcra_window_seconds(p) == 3);  // 2.5 s rounded up
  CHECK(gcra_window_seconds(hourly) == 3600);
  // Integer division: 3/s is 333333333 ns apart.
  CHECK(params(3, sec, 1).emission == 333'333'333);
}

namespace {

/// One row of a GCRA table: a request at `at` of `cost` and what must come of it.
struct row {
  nanos at;
  std::uint32_t cost;
  bool allowed;
  std::int64_t remaining;
  nanos wait;
  nanos reset;  // the tat after the request (admitted) or the stored one (rejected)
};

/// Runs `rows` in order through the real store with one limit and checks every figure.
void run_table(const gcra_params& p, const std::vector<row>& rows) {
  memory_store store({}, 42);
  const limit_spec g = group(p, {}, 1);
  const nanos base = 1'700'000'000 * sec;  // any epoch instant
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const row& r = rows[i];
    INFO("row " << i << " at " << r.at / ms << "ms cost " << r.cost);
    const auto req = ipv4_request("192.0.2.1", &g, nullptr, base + r.at, r.cost);
    const decision d = store.decide(req);
    const binding_view b = binding_of(req, d);
    CHECK(d.admitted == r.allowed);
    CHECK(b.remaining == r.remaining);
    CHECK(b.wait == r.wait);
    CHECK(b.reset - base == r.reset);
    CHECK(b.burst == p.burst);
  }
}

}  // namespace

TEST_CASE("a fresh key admits exactly burst at once, then one per T", "[gcra]") {
  // 2/s burst 5: T = 500ms, tau = 2s.
  run_table(params(2, sec, 5), {
                                   {0, 1, true, 4, 0, 500 * ms},
                                   {0, 1, true, 3, 0, 1000 * ms},
                                   {0, 1, true, 2, 0, 1500 * ms},
                                   {0, 1, true, 1, 0, 2000 * ms},
                                   {0, 1, true, 0, 0, 2500 * ms},
                                   {0, 1, false, 0, 500 * ms, 2500 * ms},
                                   {499 * ms, 1, false, 0, 1 * ms, 2500 * ms},
                                   {500 * ms, 1, true, 0, 0, 3000 * ms},
                                   {500 * ms, 1, false, 0, 500 * ms, 3000 * ms},
                                   {1000 * ms, 1, true, 0, 0, 3500 * ms},
                                   // Idle until the bucket is full again: a fresh burst.
                                   {3500 * ms, 1, true, 4, 0, 4000 * ms},
                                   {10 * sec, 1, true, 4, 0, 10 * sec + 500 * ms},
                               });
}

TEST_CASE("cost above 1 spends several cells at once", "[gcra]") {
  // 1/s burst 5: T = 1s, tau = 4s.
  run_table(params(1, sec, 5), {
                                   {0, 3, true, 2, 0, 3 * sec},
                                   // needs now >= tat + 2T - tau = 3 + 2 - 4 = 1s
                                   {0, 3, false, 2, 1 * sec, 3 * sec},
                                   // a cost-1 request still fits: remaining was honestly 2
                                   {0, 1, true, 1, 0, 4 * sec},
                                   {0, 2, false, 1, 1 * sec, 4 * sec},
                                   {1 * sec, 2, true, 0, 0, 6 * sec},
                                   {1 * sec, 5, false, 0, 5 * sec, 6 * sec},
                                   // full refill takes until tat; then cost = burst passes
                                   {6 * sec, 5, true, 0, 0, 11 * sec},
                               });
}

TEST_CASE("hourly limits keep their own clock", "[gcra]") {
  // 30/h burst 30: T = 120s.
  std::vector<row> rows;
  for (int i = 0; i < 30; ++i)
    rows.push_back({0, 1, true, 29 - i, 0, (i + 1) * 120 * sec});
  rows.push_back({0, 1, false, 0, 120 * sec, 3600 * sec});
  rows.push_back({119 * sec, 1, false, 0, 1 * sec, 3600 * sec});
  rows.push_back({120 * sec, 1, true, 0, 0, 3720 * sec});
  run_table(params(30, 3600 * sec, 30), rows);
}

TEST_CASE("gcra_check is a pure function of tat, now and cost", "[gcra]") {
  const auto p = params(10, sec, 3);  // T = 100ms, tau = 200ms
  const nanos now = 1000 * sec;
  auto r = gcra_check(0, now, 1, p);  // absent or ancient: same as tat = now
  CHECK(r.allowed);
  CHECK(r.tat == now + 100 * ms);
  r = gcra_check(now - 5 * sec, now, 3, p);
  CHECK(r.allowed);
  CHECK(r.tat == now + 300 * ms);
  r = gcra_check(now + 300 * ms, now, 1, p);
  CHECK_FALSE(r.allowed);
  CHECK(r.wait == 100 * ms);
  CHECK(r.tat == now + 300 * ms);
  // A tat beyond anything these constants allow (left by a reload that lowered the limit)
  // counts as an empty bucket, not as an hour-long wait.
  r = gcra_check(now + 3600 * sec, now, 1, p);
  CHECK_FALSE(r.allowed);
  CHECK(r.wait == 100 * ms);
}

TEST_CASE("Retry-After rounds the wait up and is never 0", "[gcra][headers]") {
  CHECK(retry_after_seconds(1) == 1);
  CHECK(retry_after_seconds(0) == 1);
  CHECK(retry_after_seconds(999 * ms) == 1);
  CHECK(retry_after_seconds(1 * sec) == 1);
  CHECK(retry_after_seconds(1 * sec + 1) == 2);
  CHECK(retry_after_seconds(120 * sec) == 120);
}
