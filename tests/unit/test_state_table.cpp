#include <catch2/catch.hpp>

#include <unistd.h>
#include <fstream>
#include <map>
#include <mutex>
#include <random>

#include "gateway/limit/state_table.hpp"

using namespace tollgate::limit;

namespace {

/// Resident set size of this process, from /proc.
std::size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

/// Finds or inserts (key, scope) under the shard lock, sets its short tat, returns the entry.
state_entry put(state_table& t, std::uint64_t key, std::uint32_t scope, nanos tat, nanos now) {
  const state_location at = t.locate(key, scope);
  std::lock_guard guard(*at.lock);
  state_entry* e = t.find(at, key, scope);
  if (e == nullptr) e = t.insert(at, key, scope, now);
  e->tat[0] = tat;
  return *e;
}

}  // namespace

TEST_CASE("the table finds what it stored, per key and scope", "[table]") {
  state_table t(1000, 7);
  const nanos now = 1'000'000;
  for (std::uint64_t k = 0; k < 500; ++k)
    put(t, k, 1, now + static_cast<nanos>(k) + 1, now);
  put(t, 5, 2, 99 * now, now);  // same key, other scope: a separate entry
  CHECK(t.size() == 501);
  for (std::uint64_t k = 0; k < 500; ++k) {
    const auto e = t.lookup(k, 1);
    REQUIRE(e);
    CHECK(e->tat[0] == now + static_cast<nanos>(k) + 1);
  }
  CHECK(t.lookup(5, 2)->tat[0] == 99 * now);
  CHECK_FALSE(t.lookup(500, 1));
  CHECK_FALSE(t.lookup(6, 2));
}

TEST_CASE("a full table evicts idle entries before live ones", "[table]") {
  state_table t(100, 3);  // one shard at this size
  REQUIRE(t.capacity() >= 100);
  const std::size_t cap = t.capacity();
  // Fill at time 1000 with live entries; every 4th expires at 1001, the rest at 5000.
  for (std::uint64_t k = 0; k < cap; ++k)
    put(t, k, 1, k % 4 == 0 ? 1001 : 5000, 1000);
  CHECK(t.size() == cap);
  const nanos now = 2000;  // every 4th entry is idle now
  // New keys replace idle ones; no live entry is lost while idle ones remain.
  const std::size_t idle = (cap + 3) / 4;
  for (std::uint64_t k = 0; k < idle; ++k)
    put(t, 10'000 + k, 1, 5000, now);
  CHECK(t.size() == cap);
  CHECK(t.evictions() == 0);
  for (std::uint64_t k = 0; k < cap; ++k) {
    if (k % 4 != 0) CHECK(t.lookup(k, 1));
  }
  // Now everything is live: a further key must evict a live one, and says so.
  put(t, 99'999, 1, 5000, now);
  CHECK(t.size() == cap);
  CHECK(t.evictions() == 1);
  CHECK(t.lookup(99'999, 1));
}

TEST_CASE("eviction keeps every remaining key reachable", "[table]") {
  // A model check: random inserts into a small full table, every surviving key must be
  // findable with its own value, and the size must match the model.
  state_table t(64, 11);
  std::map<std::uint64_t, nanos> model;
  std::mt19937_64 rng(5);
  nanos now = 0;
  for (int i = 0; i < 20'000; ++i) {
    now += 1;
    const std::uint64_t key = rng() % 400;
    // Some entries go idle quickly, others live long.
    const nanos tat = now + static_cast<nanos>(rng() % 3 == 0 ? 0 : 1 + rng() % 500);
    put(t, key, 1, tat, now);
    model[key] = tat;
    if (i % 97 == 0) {
      std::size_t present = 0;
      for (const auto& [k, v] : model) {
        if (const auto e = t.lookup(k, 1)) {
          CHECK(e->tat[0] == v);
          ++present;
        }
      }
      CHECK(present == t.size());
      CHECK(t.size() <= t.capacity());
    }
  }
}

TEST_CASE("5 million rotating addresses keep entries and memory within capacity",
          "[table][bounds]") {
  const std::size_t capacity = 100'000;
  state_table t(capacity, 99);
  const std::size_t bytes = t.memory_bytes();
  // 32-byte entries at a load factor of at most 3/4, rounded to whole huge pages.
  CHECK(bytes <= capacity * 48 + (4u << 20));
  nanos now = 1'000'000'000;
  std::size_t rss_after_first_million = 0;
  for (std::uint32_t i = 0; i < 5'000'000; ++i) {
    now += 10;  // every key stays live for a while: evictions of live state are forced
    put(t, 0x0a000000u + i, 1, now + 1'000'000, now);
    if (i == 1'000'000) rss_after_first_million = resident_bytes();
    if (i % 500'000 == 0) REQUIRE(t.size() <= t.capacity());
  }
  CHECK(t.size() <= t.capacity());
  CHECK(t.size() >= capacity * 9 / 10);  // the table is in use, not emptied
  CHECK(t.memory_bytes() == bytes);
  // Flat: the last four million keys added no resident memory beyond noise.
  CHECK(resident_bytes() <= rss_after_first_million + (2u << 20));
  // The newest keys are present: eviction drops old state, not new.
  CHECK(t.lookup(0x0a000000u + 4'999'999, 1));
}
