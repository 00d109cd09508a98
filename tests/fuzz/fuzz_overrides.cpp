/// Fuzz target: the admin API's overrides as JSON (gateway/app/override_json.*): what an
/// operator PUTs (behind the admin token) and what Redis holds for every replica (read back by
/// each replica's follower).
///
/// Input: one byte, then the rest. Byte 0 even: the rest is a PUT body; odd: a stored record.
/// Checked: a body is read or refused with a reason, never thrown out of; a rule read is written
/// back as JSON that reads again to the same rule (its id from its target, its numbers, its
/// expiry to the nanosecond as RFC 3339 keeps it); check_rule and a compiled override_set take
/// it against a policy with tiers, a keyed and a composite limit; RFC 3339 times round-trip.

#include <boost/json.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/app/override_json.hpp"
#include "gateway/config/policy.hpp"
#include "gateway/policy/compiled_policy.hpp"
#include "gateway/policy/overrides.hpp"

namespace {

using namespace tollgate;

constexpr core::nanos fuzz_now = 1'700'000'000LL * 1'000'000'000LL;

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_overrides: %s\n", what);
  std::abort();
}

const char* const policy_text = R"(
tiers:
  multipliers: { free: 1, premium: 3 }
  default: free
categories:
  api:
    limits:
      ipv4_individual: { short: { rate: 1/m, burst: 4 } }
      per_key: { key: { header: X-Api-Key }, short: { rate: 1/m, burst: 10 }, long: { rate: 100/h, burst: 100 } }
      pair: { key: [ { header: X-Api-Key }, individual ], short: { rate: 1/m, burst: 2 } }
      all: { key: global, short: { rate: 10/s, burst: 100 } }
)";

/// `t` rounded down to a whole second (RFC 3339 as written keeps seconds).
core::nanos floor_second(core::nanos t) {
  constexpr core::nanos b = 1'000'000'000LL;
  return t - ((t % b) + b) % b;
}

bool same(const policy::override_rule& a, const policy::override_rule& b) {
  return a.id == b.id && a.by == b.by && a.limit == b.limit && a.key == b.key &&
         a.address == b.address && a.tier == b.tier && a.short_term == b.short_term &&
         a.long_term == b.long_term;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const policy::compiled_policy compiled(config::load_policy_text(policy_text, "p.yaml"),
                                                {1, 2});
  static const std::vector<const policy::compiled_policy*> policies{&compiled};
  if (size == 0) return 0;
  const bool stored = (data[0] & 1) != 0;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);

  std::string error;
  const auto rule = app::override_from_json(body, fuzz_now, stored, error);
  require(rule.has_value() == error.empty(), "a refusal without a reason, or a reason kept");
  if (!rule) return 0;
  require(rule->id == policy::override_id(rule->target_text()), "an id not of its target");
  // Written back, it reads again to the same rule, stored as a replica would read it.
  const std::string text = boost::json::serialize(app::override_json(*rule));
  std::string again_error;
  const auto again = app::override_from_json(text, fuzz_now + 1, true, again_error);
  require(again.has_value(), "a rule written back does not read again");
  require(same(*rule, *again), "a rule written back reads as another");
  require(again->created == floor_second(rule->created), "its creation time does not survive");
  if (rule->expires != 0) {
    const auto back = app::parse_rfc3339(app::rfc3339(rule->expires));
    require(back && *back == floor_second(rule->expires), "an expiry does not round-trip");
  }
  // It applies, or says why not; compiled and asked, it never fails.
  const std::string why = policy::check_rule(*rule, policies);
  const policy::override_set set({*rule}, policies);
  (void)why;
  (void)set.empty();
  return 0;
}
