// Overrides (docs/design.md §15, "Overrides") compiled against a policy: which rule a request
// meets (exact key before prefix, longer prefix first, key before address, longest block
// first), what it gives (a tier of its policy, or numbers for the limits it covers), expiry,
// the rules that cannot apply, and the book that holds them for the workers.

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "gateway/config/policy.hpp"
#include "gateway/policy/compiled_policy.hpp"
#include "gateway/policy/overrides.hpp"

using namespace tollgate;

namespace {

const core::nanos now = 1'735'000'000 * core::ns_per_s;

const char* const policy_text = R"(
tiers:
  multipliers: { free: 1, premium: 3 }
  default: free
categories:
  api:
    limits:
      ipv4_individual: { short: { rate: 1/m, burst: 4 } }
      per_key: { key: { header: X-Api-Key }, short: { rate: 1/m, burst: 10 } }
      pair: { key: [ { header: X-Api-Key }, individual ], short: { rate: 1/m, burst: 2 } }
      daily: { key: { header: X-Api-Key }, quota: { limit: 100, period: day } }
      all: { key: global, short: { rate: 10/s, burst: 100 } }
)";

struct compiled {
  policy::compiled_policy p{config::load_policy_text(policy_text, "p.yaml"), {1, 2}};
  std::vector<const policy::compiled_policy*> all{&p};
  const policy::category_limits& api = *p.find("api");
};

policy::override_rule key_rule(
    std::string key, std::string tier,
    policy::override_rule::target by = policy::override_rule::target::key) {
  policy::override_rule r;
  r.by = by;
  r.limit = "per_key";
  r.key = std::move(key);
  r.tier = std::move(tier);
  r.id = policy::override_id(r.target_text());
  return r;
}

policy::override_rule address_rule(std::string_view block, std::string tier) {
  policy::override_rule r;
  r.by = policy::override_rule::target::address;
  r.address = *core::cidr::parse(block);
  r.tier = std::move(tier);
  r.id = policy::override_id(r.target_text());
  return r;
}

/// A header lookup over one X-Api-Key value.
struct one_key {
  std::string value;
  static std::string_view header(const void* self, std::string_view name) {
    return name == "x-api-key" ? std::string_view(static_cast<const one_key*>(self)->value) : "";
  }
  policy::key_sources sources() const { return {&one_key::header, this, "/", nullptr}; }
};

core::address client(std::string_view text) {
  return *core::address::parse(text);
}

}  // namespace

TEST_CASE("an override by exact key gives its tier, one by prefix the longest prefix's",
          "[overrides]") {
  compiled c;
  std::vector<policy::override_rule> rules{
      key_rule("k-partner", "premium"),
      key_rule("p_", "free", policy::override_rule::target::key_prefix),
      key_rule("p_gold_", "premium", policy::override_rule::target::key_prefix)};
  const policy::override_set set(rules, c.all);
  REQUIRE_FALSE(set.empty());
  const std::uint8_t premium = c.p.tiers()->find("premium"), free = c.p.tiers()->find("free");
  auto tier_of = [&](std::string key) {
    const one_key k{std::move(key)};
    policy::override_match m;
    return set.find(c.p, c.api, client("10.0.0.1"), k.sources(), now, m) ? m.tier : policy::no_tier;
  };
  CHECK(tier_of("k-partner") == premium);
  CHECK(tier_of("k-partner-2") == policy::no_tier);
  CHECK(tier_of("p_x") == free);
  CHECK(tier_of("p_gold_x") == premium);
  CHECK(tier_of("p") == policy::no_tier);
  CHECK(tier_of("") == policy::no_tier);
}

TEST_CASE("a key override comes before an address one, and the longest block wins", "[overrides]") {
  compiled c;
  std::vector<policy::override_rule> rules{address_rule("10.0.0.0/8", "premium"),
                                           address_rule("10.1.0.0/16", "free"),
                                           key_rule("k", "premium")};
  const policy::override_set set(rules, c.all);
  const std::uint8_t premium = c.p.tiers()->find("premium"), free = c.p.tiers()->find("free");
  policy::override_match m;
  const one_key none{""}, k{"k"};
  REQUIRE(set.find(c.p, c.api, client("10.1.2.3"), none.sources(), now, m));
  CHECK(m.tier == free);
  m = {};
  REQUIRE(set.find(c.p, c.api, client("10.2.2.3"), none.sources(), now, m));
  CHECK(m.tier == premium);
  m = {};
  REQUIRE(set.find(c.p, c.api, client("10.1.2.3"), k.sources(), now, m));
  CHECK(m.tier == premium);
  m = {};
  CHECK_FALSE(set.find(c.p, c.api, client("192.0.2.1"), none.sources(), now, m));
}

TEST_CASE("numbers replace the limits they cover, and only rate limits on a key", "[overrides]") {
  compiled c;
  policy::override_rule keyed = key_rule("k", "");
  keyed.short_term = policy::override_rule::numbers{{1, 60 * core::ns_per_s}, 25};
  policy::override_rule block = address_rule("192.0.2.0/24", "");
  block.short_term = policy::override_rule::numbers{{1, 60 * core::ns_per_s}, 7};
  const policy::override_set set({keyed, block}, c.all);
  const one_key k{"k"};
  policy::override_match m;
  REQUIRE(set.find(c.p, c.api, client("10.0.0.1"), k.sources(), now, m));
  CHECK(m.tier == policy::no_tier);
  REQUIRE(m.any_spec);
  const std::uint8_t per_key = 1;
  REQUIRE(m.specs[per_key] != nullptr);
  CHECK(m.specs[per_key]->tiers[0].burst == 25);
  CHECK(m.specs[per_key]->state_name == c.api.limits[per_key].state_name);
  CHECK(m.specs[0] == nullptr);
  // The address's numbers: every rate limit but the global one and the quota.
  m = {};
  REQUIRE(set.find(c.p, c.api, client("192.0.2.9"), one_key{""}.sources(), now, m));
  for (const auto& s : c.api.limits) {
    const bool covered = s.name == "ipv4_individual" || s.name == "per_key" || s.name == "pair";
    INFO(s.name);
    CHECK((m.specs[s.slot] != nullptr) == covered);
    if (covered) CHECK(m.specs[s.slot]->tiers[0].burst == 7);
  }
}

TEST_CASE("an override past its expiry no longer applies", "[overrides]") {
  compiled c;
  policy::override_rule r = key_rule("k", "premium");
  r.expires = now + core::ns_per_s;
  const policy::override_set set({r}, c.all);
  const one_key k{"k"};
  policy::override_match m;
  CHECK(set.find(c.p, c.api, client("10.0.0.1"), k.sources(), now, m));
  m = {};
  CHECK_FALSE(set.find(c.p, c.api, client("10.0.0.1"), k.sources(), now + core::ns_per_s, m));
}

TEST_CASE("rules that cannot apply are named", "[overrides]") {
  compiled c;
  auto why = [&](policy::override_rule r) { return policy::check_rule(r, c.all); };
  CHECK(why(key_rule("k", "premium")).empty());
  CHECK(why(address_rule("10.0.0.0/8", "premium")).empty());
  policy::override_rule r = key_rule("k", "gold");
  CHECK(why(r) == "the policy of limit 'per_key' has no tier 'gold'");
  CHECK(why(address_rule("10.0.0.0/8", "gold")) == "no policy has a tier named 'gold'");
  r = key_rule("k", "premium");
  r.limit = "nope";
  CHECK(why(r) == "no category has a limit named 'nope'");
  r.limit = "all";
  CHECK(why(r).find("global") != std::string::npos);
  r.limit = "ipv4_individual";
  CHECK(why(r).find("the address") != std::string::npos);
  r = key_rule("k", "");
  r.limit = "daily";
  r.short_term = policy::override_rule::numbers{{1, core::ns_per_s}, 2};
  CHECK(why(r).find("quota") != std::string::npos);
  r.limit = "per_key";
  r.short_term.reset();
  r.long_term = policy::override_rule::numbers{{1, 3600 * core::ns_per_s}, 2};
  CHECK(why(r) == "limit 'per_key' has no long tier");
}

TEST_CASE("the book replaces by id, holds at most its capacity and moves its version",
          "[overrides]") {
  compiled c;
  policy::override_book book;
  auto owner = std::make_shared<int>(0);
  book.attach(7, c.all, owner);
  CHECK(book.compiled(7) == nullptr);  // nothing to apply
  const auto v0 = book.version();
  policy::override_rule r = key_rule("k", "premium");
  r.created = now;
  CHECK(book.put(r) == policy::override_book::placed::added);
  CHECK(book.version() != v0);
  REQUIRE(book.compiled(7) != nullptr);
  r.tier = "free";
  CHECK(book.put(r) == policy::override_book::placed::replaced);
  REQUIRE(book.list(now).size() == 1);
  CHECK(book.list(now)[0].tier == "free");
  // replace_all says whether anything changed.
  CHECK_FALSE(book.replace_all(book.list(now)));
  CHECK(book.replace_all({}));
  CHECK(book.list(now).empty());
  // Full at capacity; an expired rule makes room.
  for (std::size_t i = 0; i < policy::override_book::capacity; ++i) {
    policy::override_rule x = key_rule("k" + std::to_string(i), "premium");
    x.created = now;
    if (i == 0) x.expires = now + 1;
    REQUIRE(book.put(x) == policy::override_book::placed::added);
  }
  policy::override_rule more = key_rule("more", "premium");
  more.created = now;
  CHECK(book.put(more) == policy::override_book::placed::full);
  more.created = now + 1;
  CHECK(book.put(more) == policy::override_book::placed::added);
  // A configuration no longer alive is let go.
  owner.reset();
  CHECK(book.remove(more.id));
  CHECK(book.compiled(7) == nullptr);
}
