// The worker's pool of scratch blocks (gateway/net/scratch.hpp): what it keeps for reuse and
// what it gives back to the system.
#include <catch2/catch.hpp>

#include <memory>
#include <vector>

#include "gateway/net/scratch.hpp"

using tollgate::net::connection_scratch;
using tollgate::net::scratch_pool;
using namespace std::chrono_literals;

namespace {

/// Takes `n` blocks from `pool` at `t`, then gives them all back.
void burst(scratch_pool& pool, std::size_t n, scratch_pool::clock::time_point t) {
  std::vector<std::unique_ptr<connection_scratch>> held;
  for (std::size_t i = 0; i < n; ++i)
    held.push_back(pool.take(t));
  CHECK(pool.in_use() == n);
  for (auto& s : held)
    pool.give(std::move(s));
  CHECK(pool.in_use() == 0);
}

}  // namespace

TEST_CASE("the scratch pool keeps what a burst gave back, up to max_spare", "[scratch]") {
  scratch_pool pool;
  const auto t0 = scratch_pool::clock::now();
  burst(pool, 200, t0);
  CHECK(pool.spare() == 200);
  // Taken again within the second: every one is a spare (none made), all kept.
  burst(pool, 200, t0 + 500ms);
  CHECK(pool.spare() == 200);
  burst(pool, scratch_pool::max_spare + 100, t0 + 600ms);
  CHECK(pool.spare() == scratch_pool::max_spare);
}

TEST_CASE("spares unused for a second go back to the system, down to min_spare", "[scratch]") {
  scratch_pool pool;
  const auto t0 = scratch_pool::clock::now();
  burst(pool, 200, t0);
  pool.trim(t0 + 900ms);  // not a second yet
  CHECK(pool.spare() == 200);
  pool.trim(t0 + 1500ms);  // nothing taken for a second and a half
  CHECK(pool.spare() == scratch_pool::min_spare);
}

TEST_CASE("a worker in steady use keeps the spares it used and frees the rest", "[scratch]") {
  scratch_pool pool;
  const auto t0 = scratch_pool::clock::now();
  burst(pool, 200, t0);  // its first take trimmed (nothing), at t0
  for (int i = 0; i < 5; ++i)
    burst(pool, 50, t0 + 600ms + i * 50ms);
  // The second since t0 had all 200 in use at once: none sat unused.
  pool.trim(t0 + 1200ms);
  CHECK(pool.spare() == 200);
  // The next second the worker never has more than 50 in use at once: 150 sat unused.
  for (int i = 0; i < 5; ++i)
    burst(pool, 50, t0 + 1500ms + i * 100ms);
  CHECK(pool.spare() == 200);
  pool.trim(t0 + 2300ms);
  CHECK(pool.spare() == 50);
  // The next it needs 50 again: nothing more goes.
  burst(pool, 50, t0 + 2500ms);
  pool.trim(t0 + 3400ms);
  CHECK(pool.spare() == 50);
}
