// The limiter's side of the admin API's operator controls: the most limited clients
// (space-saving summaries over two windows) and forgetting a block's state.

#include <catch2/catch.hpp>

#include <map>
#include <random>

#include "gateway/limit/memory_store.hpp"
#include "gateway/limit/top_limited.hpp"
#include "support.hpp"

using namespace tollgate;
using namespace tollgate::limit;
using namespace tollgate::test;

namespace {

const nanos t0 = 1'700'000'040 * sec;  // 40 s into a minute

level_key ind(std::uint64_t k) {
  return {k, level::ipv4_individual};
}
level_key net(std::uint64_t k) {
  return {k, level::ipv4_network};
}

/// The count of `k` in a merged list, or 0.
std::uint64_t count_of(const std::vector<space_saving::item>& items, const level_key& k) {
  for (const auto& i : items)
    if (i.who == k) return i.count;
  return 0;
}

}  // namespace

TEST_CASE("space-saving counts exactly while its keys fit", "[top_limited]") {
  space_saving s;
  for (std::uint64_t k = 0; k < space_saving::size; ++k) {
    for (std::uint64_t n = 0; n <= k; ++n)
      s.add(ind(k));
  }
  std::map<std::uint64_t, std::uint64_t> seen;
  for (const auto& i : s) {
    CHECK(i.error == 0);
    seen[i.who.key] = i.count;
  }
  REQUIRE(seen.size() == space_saving::size);
  for (std::uint64_t k = 0; k < space_saving::size; ++k)
    CHECK(seen[k] == k + 1);
  // IPv4 and IPv6 keys with the same bits are different clients.
  s.clear();
  s.add(ind(7));
  s.add({7, level::ipv6_subnet});
  CHECK(s.end() - s.begin() == 2);
}

TEST_CASE("space-saving keeps the heavy hitters of a stream of rotating addresses",
          "[top_limited]") {
  // Three heavy clients among 100 000 rejections from 20 000 one-off addresses (an attack that
  // rotates sources): each heavy one is kept, with a count no lower than the truth and at most
  // its stated error above it.
  space_saving s;
  std::mt19937_64 rng(7);
  const std::map<std::uint64_t, std::uint64_t> heavy = {{1, 9000}, {2, 6000}, {3, 4000}};
  std::vector<std::uint64_t> stream;
  for (const auto& [k, n] : heavy)
    stream.insert(stream.end(), n, k);
  for (std::uint64_t i = 0; i < 81'000; ++i)
    stream.push_back(1000 + i % 20'000);
  std::shuffle(stream.begin(), stream.end(), rng);
  for (const auto k : stream)
    s.add(ind(k));
  const auto top = top_of({s.begin(), s.end()}, 3);
  REQUIRE(top.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    INFO(i);
    CHECK(top[i].who.key == i + 1);
    const std::uint64_t truth = heavy.at(top[i].who.key);
    CHECK(top[i].count >= truth);
    CHECK(top[i].count - top[i].error <= truth);
  }
}

TEST_CASE("a tally reports the current and the previous window, merged over workers",
          "[top_limited]") {
  const nanos minute = 60 * sec;
  rejection_tally a(minute), b(minute);
  for (int i = 0; i < 5; ++i)
    a.note(ind(1), net(100), t0);
  for (int i = 0; i < 3; ++i)
    b.note(ind(2), net(100), t0);
  b.note(ind(1), net(100), t0 + minute);  // the next window

  auto merged_at = [&](nanos now) {
    rejection_tally::merged m;
    a.add_to(m, now);
    b.add_to(m, now);
    return std::pair{top_of(m.addresses, 10), top_of(m.networks, 10)};
  };
  auto [addresses, networks] = merged_at(t0 + minute);
  CHECK(count_of(addresses, ind(1)) == 6);  // 5 from a's previous window, 1 from b's current
  CHECK(count_of(addresses, ind(2)) == 3);
  CHECK(addresses.front().who == ind(1));
  CHECK(count_of(networks, net(100)) == 9);
  // Two windows on, only b's later window is recent; three on, nothing.
  std::tie(addresses, networks) = merged_at(t0 + 2 * minute);
  CHECK(count_of(addresses, ind(1)) == 1);
  CHECK(count_of(addresses, ind(2)) == 0);
  std::tie(addresses, networks) = merged_at(t0 + 3 * minute);
  CHECK(addresses.empty());
  CHECK(networks.empty());
  CHECK(a.since(t0) == (t0 / minute - 1) * minute);
}

TEST_CASE("forgetting a block removes its address-level state in every category and no other",
          "[top_limited][store]") {
  memory_store store({}, 1);
  const limit_spec fine_a = group(params(1, sec, 1), {}, 11);
  const limit_spec coarse_a = group(params(1, sec, 5), {}, 12, level::ipv4_network);
  const limit_spec fine_b = group(params(1, sec, 1), {}, 21);  // another category
  const limit_spec fine_v6 = group(params(1, sec, 1), {}, 31, level::ipv6_subnet);
  for (const char* a : {"198.51.100.1", "198.51.100.2", "198.51.101.1"}) {
    REQUIRE(store.decide(ipv4_request(a, &fine_a, &coarse_a, t0)).admitted);
    REQUIRE(store.decide(ipv4_request(a, &fine_b, nullptr, t0)).admitted);
  }
  limit_request v6;
  v6.now = t0;
  v6.cost = 1;
  const auto k6 = keys_of(address::parse("2001:db8::1").value(), {});
  v6.groups[v6.group_count++] = {&fine_v6, k6.fine_key};
  REQUIRE(store.decide(v6).admitted);
  const auto key = [](const char* a) { return keys_of(address::parse(a).value(), {}); };

  std::string error;
  const auto block = core::key_block::parse("198.51.100.0/24", {}, error).value();
  // Two categories' individual keys in the /24 (4), and the /24's network key (1).
  CHECK(store.forget(block, {}) == 5);
  CHECK_FALSE(store.lookup(fine_a, key("198.51.100.1").fine_key));
  CHECK_FALSE(store.lookup(fine_b, key("198.51.100.2").fine_key));
  CHECK_FALSE(store.lookup(coarse_a, key("198.51.100.1").coarse_key));
  CHECK(store.lookup(fine_a, key("198.51.101.1").fine_key));
  CHECK(store.lookup(fine_b, key("198.51.101.1").fine_key));
  CHECK(store.lookup(coarse_a, key("198.51.101.1").coarse_key));
  CHECK(store.lookup(fine_v6, k6.fine_key));
  // Served again at once: the state is as if never seen.
  CHECK(store.decide(ipv4_request("198.51.100.1", &fine_a, &coarse_a, t0)).admitted);
  CHECK_FALSE(store.decide(ipv4_request("198.51.101.1", &fine_a, &coarse_a, t0)).admitted);

  // One address: its own key and its network's (shared with its neighbours).
  const auto one = core::key_block::parse("198.51.101.1", {}, error).value();
  CHECK(store.forget(one, {}) == 3);
  CHECK_FALSE(store.lookup(coarse_a, key("198.51.101.1").coarse_key));
}

TEST_CASE("forgetting keeps every other key of a full table reachable", "[top_limited][store]") {
  // Deleting shifts entries back along their probe runs: after forgetting a block out of a
  // crowded table, every key outside it must still be found.
  memory_store store({4000, 10, 10, 10, 10}, 3);
  const limit_spec fine = group(params(1, sec, 1), {}, 5);
  std::vector<std::uint32_t> kept;
  for (std::uint32_t i = 0; i < 900; ++i) {
    const std::uint32_t a = 0x0a000000u + i * 37;
    limit_request r;
    r.now = t0;
    r.cost = 1;
    r.groups[r.group_count++] = {&fine, a};
    REQUIRE(store.decide(r).admitted);
    if ((a & 0xffffff00u) != 0x0a000100u) kept.push_back(a);
  }
  std::string error;
  const auto block = core::key_block::parse("10.0.1.0/24", {}, error).value();
  CHECK(store.forget(block, {}) == 900 - kept.size());
  for (const auto a : kept) {
    INFO(a);
    CHECK(store.lookup(fine, a));
  }
  CHECK(store.tracked(0) == kept.size());
}
