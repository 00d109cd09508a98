// The gate (docs/design.md §5's order as values) as tables, without a socket: every combination of
// ban, required proof, proof sent, the limits' decision, pay to pass and shadow mode, to the
// answer and the effects. In the style of Envoy's local_ratelimit filter_test.cc.

#include <catch2/catch.hpp>

#include <functional>
#include <optional>
#include <string>

#include "gateway/config/gateway.hpp"
#include "gateway/config/policy.hpp"
#include "gateway/limit/memory_store.hpp"
#include "gateway/policy/gate.hpp"
#include "gateway/pow/challenge.hpp"
#include "keys_support.hpp"

using namespace tollgate;
using core::outcome;
using pow::proof_failure;

namespace {

const core::nanos now = 1'735'000'000 * core::ns_per_s;
const std::int64_t now_s = now / core::ns_per_s;

/// `guarded` asks a proof of clients with violations; `paying` lets a proof pay past its
/// address level (and not past its global limit); `plain` has neither; `dry` is in shadow mode.
const char* const policy_text = R"(
categories:
  guarded:
    limits:
      ipv4_individual: { short: { rate: 1/s, burst: 1 } }
    pow: { enabled: true, base_bits: 3, step_bits: 1, max_bits: 6, on_limit: true, on_limit_bits: 4 }
  paying:
    limits:
      ipv4_individual: { short: { rate: 1/s, burst: 1 } }
      everyone: { key: global, short: { rate: 1/s, burst: 2 } }
    pow: { on_limit: true, on_limit_bits: 4 }
  keyed:
    limits:
      ipv4_individual: { short: { rate: 1/s, burst: 1 } }
      per_api_key: { key: { header: X-Api-Key }, short: { rate: 1/s, burst: 1 } }
    pow: { on_limit: true, on_limit_bits: 4 }
  plain:
    limits:
      ipv4_individual: { short: { rate: 1/s, burst: 1 } }
  dry:
    mode: shadow
    limits:
      ipv4_individual: { short: { rate: 1/s, burst: 1 } }
violations:
  failed_auth: { levels: [individual], ban: { threshold: 3, duration: 1h } }
)";

/// One process's worth of gate: policy, PoW state, a store; a client.
struct world {
  config::policy_config cfg = config::load_policy_text(policy_text, "gate.yaml");
  policy::compiled_policy compiled{cfg, {1, 2}};
  config::pow_settings settings;
  policy::pow_state pow{"gate-test-secret", settings, cfg.pow_counters};
  policy::gate gate{pow};
  limit::memory_store store{{}, 3};
  core::address client = core::address::parse("192.0.2.10").value();
  policy::client_subjects who = policy::subjects_of(client, compiled.prefixes());

  const policy::category_limits& category(const char* name) const { return *compiled.find(name); }
  /// A proof for `name` solved at `bits`, issued to `for_whom` (default: the client), expiring
  /// at `expires`.
  std::string proof(const char* name, unsigned bits, std::int64_t expires = now_s + 60,
                    std::optional<std::uint64_t> for_whom = std::nullopt) const {
    const std::string challenge =
        pow.challenger().issue({expires, static_cast<std::uint8_t>(bits), category(name).pow.tag,
                                for_whom.value_or(who.tag)});
    return challenge + ":" + pow::solve(challenge, bits, 1);
  }
  /// Raises the client's violation counters `n` times (reason failed_auth, no ban yet).
  void violate(unsigned n) {
    const auto& rules = compiled.violations();
    const auto i = *rules.find("failed_auth");
    pow::reason_rule rule = rules.rules[i];
    rule.ban_threshold = 0;
    for (unsigned k = 0; k < n; ++k)
      pow.violations().record(who.individual, who.network, 0, rule, now);
  }
  void ban() {
    const auto& rules = compiled.violations();
    const auto i = *rules.find("failed_auth");
    for (int k = 0; k < 3; ++k)
      pow.violations().record(who.individual, who.network, 0, rules.rules[i], now);
  }
  /// Spends the client's limits in category `name` (one request's worth of each burst).
  void exhaust(const char* name) {
    std::uint32_t unkeyed = 0;
    store.decide(
        compiled.request(category(name), client, test::fake_request{}.keys(), 1, now, unkeyed));
  }
};

/// What one request came to.
struct result {
  outcome answer;
  bool asked_limits;
  policy::gate_verdict verdict;
};

/// The caller's part after each step: spends the proof the gate claimed, if any.
void spend(world& w, const policy::gate_input& in, policy::gate_verdict& v) {
  if (!v.effects.spend) return;
  if (!policy::commit_proof(w.pow, v.sent, now_s)) w.gate.claim_lost(in, v);
}

result run(world& w, const char* name, const std::string& solution, bool exempt = false) {
  const auto& c = w.category(name);
  const policy::gate_input in{&c, &w.who, solution, now, exempt};
  policy::gate_verdict v;
  w.gate.before_limits(in, v);
  spend(w, in, v);
  if (!v.ask_limits) return {v.result, false, v};
  std::uint32_t unkeyed = 0;
  const auto req = w.compiled.request(c, w.client, test::fake_request{}.keys(), 1, now, unkeyed);
  const auto d = w.store.decide(req);
  w.gate.after_limits(in, req, d, v);
  spend(w, in, v);
  return {v.result, true, v};
}

}  // namespace

TEST_CASE("gate: a ban comes first, whatever else is true", "[gate]") {
  world w;
  w.ban();
  for (const char* name : {"guarded", "paying", "plain", "dry"}) {
    INFO(name);
    const auto r = run(w, name, w.proof(name, 6));
    CHECK(r.answer == outcome::banned);
    CHECK_FALSE(r.asked_limits);           // nothing consumed
    CHECK(r.verdict.retry_after == 3600);  // the ban's duration
    CHECK_FALSE(r.verdict.limits_checked);
    CHECK_FALSE(r.verdict.effects.verification);  // the proof was never looked at
  }
}

TEST_CASE("gate: the access allow list passes before a ban, a proof or a limit", "[gate]") {
  world w;
  w.ban();
  for (const char* name : {"guarded", "paying", "plain", "dry"}) {
    INFO(name);
    w.exhaust(name);
    const std::string proof = w.proof(name, 6);
    const auto r = run(w, name, proof, true);
    CHECK(r.answer == outcome::allowed);
    CHECK_FALSE(r.asked_limits);  // nothing consumed
    CHECK_FALSE(r.verdict.limits_checked);
    CHECK_FALSE(r.verdict.effects.verification);  // the proof was never looked at
    CHECK_FALSE(r.verdict.effects.pow_failed);
    // Not exempt, the same client is still banned: the list changed nothing in the tables.
    CHECK(run(w, name, proof).answer == outcome::banned);
  }
}

TEST_CASE("gate: a client with violations shows a proof of the required bits first", "[gate]") {
  struct row {
    const char* what;
    unsigned violations;
    std::function<std::string(world&)> solution;
    outcome answer;
    bool asked_limits;
    std::optional<proof_failure> counted;  // the proof result to count
    bool pow_failed;                       // a pow_failed violation to record
    unsigned challenge_bits;               // of the 428, when one
    proof_failure reason;                  // of the 428
  };
  const std::vector<row> table = {
      {"no violations, no proof: straight to the limits", 0, [](world&) { return ""; },
       outcome::allowed, true, std::nullopt, false, 0, proof_failure::none},
      {"no violations, a valid proof is spent anyway", 0,
       [](world& w) { return w.proof("guarded", 3); }, outcome::allowed, true, proof_failure::none,
       false, 0, proof_failure::none},
      {"N=1 without a proof: 428 at base bits, nothing counted", 1, [](world&) { return ""; },
       outcome::challenged, false, std::nullopt, false, 3, proof_failure::none},
      {"N=2 without a proof: base + step", 2, [](world&) { return ""; }, outcome::challenged, false,
       std::nullopt, false, 4, proof_failure::none},
      {"N=1 with a valid proof: to the limits", 1, [](world& w) { return w.proof("guarded", 3); },
       outcome::allowed, true, proof_failure::none, false, 0, proof_failure::none},
      {"N=2 with too few bits", 2, [](world& w) { return w.proof("guarded", 3); },
       outcome::challenged, false, proof_failure::insufficient_work, true, 4,
       proof_failure::insufficient_work},
      {"expired: no violation", 1, [](world& w) { return w.proof("guarded", 3, now_s - 1); },
       outcome::challenged, false, proof_failure::expired, false, 3, proof_failure::expired},
      {"malformed", 1, [](world&) { return "not-a-proof"; }, outcome::challenged, false,
       proof_failure::malformed, true, 3, proof_failure::malformed},
      {"bad signature", 1,
       [](world& w) {
         std::string p = w.proof("guarded", 3);
         p[10] = p[10] == 'A' ? 'B' : 'A';
         return p;
       },
       outcome::challenged, false, proof_failure::bad_signature, true, 3,
       proof_failure::bad_signature},
      {"another client's proof", 1,
       [](world& w) { return w.proof("guarded", 3, now_s + 60, w.who.tag + 1); },
       outcome::challenged, false, proof_failure::wrong_client, true, 3,
       proof_failure::wrong_client},
      {"another category's proof", 1, [](world& w) { return w.proof("paying", 3); },
       outcome::challenged, false, proof_failure::wrong_client, true, 3,
       proof_failure::wrong_client},
  };
  for (const row& r : table) {
    INFO(r.what);
    world w;
    w.violate(r.violations);
    const auto got = run(w, "guarded", r.solution(w));
    CHECK(got.answer == r.answer);
    CHECK(got.asked_limits == r.asked_limits);
    CHECK(got.verdict.effects.verification == r.counted);
    CHECK(got.verdict.effects.pow_failed == r.pow_failed);
    CHECK_FALSE(got.verdict.effects.extra_valid);
    CHECK(got.verdict.limits_checked == r.asked_limits);
    if (r.answer == outcome::challenged) {
      CHECK(got.verdict.challenge.bits == r.challenge_bits);
      CHECK(got.verdict.challenge.reason == r.reason);
      CHECK(got.verdict.challenge.expires == now_s + 60);
      CHECK(got.verdict.challenge.challenge.size() == pow::challenge_length);
    }
  }
}

TEST_CASE("gate: one proof is spent once", "[gate]") {
  world w;
  w.violate(1);
  const std::string p = w.proof("guarded", 3);
  CHECK(run(w, "guarded", p).answer == outcome::allowed);
  const auto again = run(w, "guarded", p);
  CHECK(again.answer == outcome::challenged);
  CHECK(again.verdict.challenge.reason == proof_failure::replayed);
  CHECK(again.verdict.effects.pow_failed);
}

TEST_CASE("gate: a proof is only claimed, and of two requests claiming it at once one pays",
          "[gate]") {
  world w;
  w.violate(1);
  const std::string p = w.proof("guarded", 3);
  const auto& c = w.category("guarded");
  const policy::gate_input in{&c, &w.who, p, now, false};
  // Both requests see the proof unspent: the gate writes nothing to the replay cache.
  policy::gate_verdict first, second;
  w.gate.before_limits(in, first);
  w.gate.before_limits(in, second);
  REQUIRE(first.ask_limits);
  REQUIRE(second.ask_limits);
  CHECK(first.effects.spend);
  CHECK(second.effects.spend);
  CHECK(first.claimed == policy::claim_stage::requirement);
  CHECK(w.pow.replays().size() == 0);
  // The first spends it; the second's claim is lost: 428 for a replay, a violation.
  CHECK(policy::commit_proof(w.pow, first.sent, now_s));
  CHECK_FALSE(policy::commit_proof(w.pow, second.sent, now_s));
  w.gate.claim_lost(in, second);
  CHECK(second.result == outcome::challenged);
  CHECK_FALSE(second.ask_limits);
  CHECK(second.challenge.reason == proof_failure::replayed);
  CHECK(second.challenge.bits == 3);
  CHECK(second.effects.pow_failed);
  CHECK(second.effects.verification == proof_failure::replayed);
  CHECK_FALSE(second.effects.spend);
}

TEST_CASE("gate: a claim lost after the limits changes a pay-to-pass, not an admitted request",
          "[gate]") {
  world w;
  const auto& c = w.category("paying");
  const std::string p = w.proof("paying", 4);
  const policy::gate_input in{&c, &w.who, p, now, false};
  std::uint32_t unkeyed = 0;
  const auto req = w.compiled.request(c, w.client, test::fake_request{}.keys(), 1, now, unkeyed);
  limit::decision admitted;
  admitted.admitted = true;
  policy::gate_verdict v;
  w.gate.before_limits(in, v);
  w.gate.after_limits(in, req, admitted, v);
  CHECK(v.claimed == policy::claim_stage::admitted);
  w.gate.claim_lost(in, v);
  CHECK(v.result == outcome::allowed);
  CHECK(v.effects.verification == proof_failure::replayed);
  CHECK_FALSE(v.effects.pow_failed);
  // Rejected by the address level: the proof pays, until another request spent it first.
  w.exhaust("paying");
  const auto d = w.store.decide(req);
  REQUIRE_FALSE(d.admitted);
  policy::gate_verdict pay;
  w.gate.before_limits(in, pay);
  w.gate.after_limits(in, req, d, pay);
  CHECK(pay.result == outcome::pow_passed);
  CHECK(pay.claimed == policy::claim_stage::pay);
  w.gate.claim_lost(in, pay);
  CHECK(pay.result == outcome::challenged);
  CHECK(pay.challenge.reason == proof_failure::replayed);
  CHECK(pay.challenge.bits == 4);
  CHECK(pay.effects.pow_failed);
}

TEST_CASE("gate: after the limits, 429, pay to pass, and what a proof may pay for", "[gate]") {
  struct row {
    const char* what;
    const char* category;
    bool exhausted;  // the client's address level spent beforehand
    bool global_exhausted;
    std::function<std::string(world&)> solution;
    outcome answer;
    std::optional<proof_failure> counted;
    unsigned challenge_bits;
  };
  const std::vector<row> table = {
      {"admitted", "plain", false, false, [](world&) { return ""; }, outcome::allowed, std::nullopt,
       0},
      {"rejected, no pay to pass: 429", "plain", true, false, [](world&) { return ""; },
       outcome::limited, std::nullopt, 0},
      {"rejected, no pay to pass: a proof does not help", "plain", true, false,
       [](world& w) { return w.proof("plain", 4); }, outcome::limited, proof_failure::none, 0},
      {"rejected at the address, pay to pass without a proof: 428", "paying", true, false,
       [](world&) { return ""; }, outcome::challenged, std::nullopt, 4},
      {"rejected at the address, a proof of on_limit_bits pays", "paying", true, false,
       [](world& w) { return w.proof("paying", 4); }, outcome::pow_passed, proof_failure::none, 0},
      {"rejected at the address, too few bits to pay: 428 again", "paying", true, false,
       [](world& w) { return w.proof("paying", 2); }, outcome::challenged,
       proof_failure::insufficient_work, 4},
      {"rejected by the global limit: a proof never pays past it", "paying", false, true,
       [](world& w) { return w.proof("paying", 4); }, outcome::limited, proof_failure::none, 0},
      {"shadow mode: forwarded as shadow_limited", "dry", true, false, [](world&) { return ""; },
       outcome::shadow_limited, std::nullopt, 0},
  };
  for (const row& r : table) {
    INFO(r.what);
    world w;
    if (r.exhausted) w.exhaust(r.category);
    if (r.global_exhausted) {
      // Other clients spend the global limit.
      for (const char* a : {"198.51.100.1", "198.51.100.2"}) {
        std::uint32_t unkeyed = 0;
        w.store.decide(w.compiled.request(w.category(r.category), core::address::parse(a).value(),
                                          test::fake_request{}.keys(), 1, now, unkeyed));
      }
    }
    const auto got = run(w, r.category, r.solution(w));
    CHECK(got.answer == r.answer);
    CHECK(got.asked_limits);
    CHECK(got.verdict.limits_checked);  // every answer after the limits carries their headers
    CHECK(got.verdict.effects.verification == r.counted);
    if (r.answer == outcome::challenged) CHECK(got.verdict.challenge.bits == r.challenge_bits);
    CHECK(got.verdict.forward() ==
          (r.answer == outcome::allowed || r.answer == outcome::pow_passed ||
           r.answer == outcome::shadow_limited));
  }
}

TEST_CASE("gate: a proof spent on the requirement is not asked to pay twice in silence", "[gate]") {
  // N > 0 and the limits reject: the proof paid for the requirement, pay to pass asks for
  // another. That 428 names no failure and records no violation; the first proof is counted
  // valid.
  world w;
  w.violate(1);
  w.exhaust("guarded");
  const auto got = run(w, "guarded", w.proof("guarded", 3));
  CHECK(got.answer == outcome::challenged);
  CHECK(got.verdict.challenge.bits == 4);
  CHECK(got.verdict.challenge.reason == proof_failure::none);
  CHECK(got.verdict.effects.extra_valid);
  CHECK_FALSE(got.verdict.effects.verification);
  CHECK_FALSE(got.verdict.effects.pow_failed);
  // A proof of the pay-to-pass bits that also meets the requirement pays for both? No: one
  // valid proof is spent once, whatever it paid for.
  const auto second = run(w, "guarded", w.proof("guarded", 4));
  CHECK(second.answer == outcome::challenged);
  CHECK(second.verdict.effects.extra_valid);
}

TEST_CASE("gate: a proof never pays past a key limit, only past the address levels", "[gate]") {
  world w;
  const auto& c = w.category("keyed");
  test::fake_request with_key;
  with_key.headers.emplace("x-api-key", "k1");
  auto decide = [&](const core::address& who, const std::string& solution) {
    const auto subjects = policy::subjects_of(who, w.compiled.prefixes());
    const policy::gate_input in{&c, &subjects, solution, now};
    policy::gate_verdict v;
    w.gate.before_limits(in, v);
    REQUIRE(v.ask_limits);
    std::uint32_t unkeyed = 0;
    const auto req = w.compiled.request(c, who, with_key.keys(), 1, now, unkeyed);
    w.gate.after_limits(in, req, w.store.decide(req), v);
    return v.result;
  };
  // Another address spends the key's burst: the key limit alone rejects the client.
  CHECK(decide(core::address::parse("198.51.100.7").value(), "") == outcome::allowed);
  CHECK(decide(w.client, "") == outcome::limited);
  CHECK(decide(w.client, w.proof("keyed", 4)) == outcome::limited);
  // Rejected at the address level only (the key's own bucket has room): the proof pays.
  with_key.headers["x-api-key"] = "k2";
  CHECK(decide(w.client, "") == outcome::allowed);
  with_key.headers["x-api-key"] = "k3";
  CHECK(decide(w.client, "") == outcome::challenged);
  CHECK(decide(w.client, w.proof("keyed", 4)) == outcome::pow_passed);
}

TEST_CASE("a challenge lives long enough for a slow client to pay it", "[gate]") {
  config::pow_settings settings;  // challenge_ttl 60 s, solver_hash_rate 250 000/s
  const config::pow_counters_config counters;
  const policy::pow_state pow{"secret", settings, counters};
  // 8 * 2^bits / 250 000, rounded up, never under the configured 60 s nor over a day.
  CHECK(pow.lifetime(0) == 60);
  CHECK(pow.lifetime(16) == 60);
  CHECK(pow.lifetime(20) == 60);   // 33.6 s of work at 8x
  CHECK(pow.lifetime(22) == 135);  // 134.2
  CHECK(pow.lifetime(24) == 537);  // 536.9
  CHECK(pow.lifetime(28) == 8590);
  CHECK(pow.lifetime(34) == policy::pow_state::max_lifetime);
  CHECK(pow.lifetime(64) == policy::pow_state::max_lifetime);
  CHECK(pow.lifetime(200) == policy::pow_state::max_lifetime);

  settings.solver_hash_rate = 1'000'000'000;  // a fast fleet: the configured floor holds
  settings.challenge_ttl = std::chrono::seconds(30);
  const policy::pow_state fast{"secret", settings, counters};
  CHECK(fast.lifetime(28) == 30);
  CHECK(fast.lifetime(36) == 550);

  // What a 428 says is what the challenge carries.
  policy::challenge_values v;
  policy::issue_challenge(pow, {}, {}, 24, pow::proof_failure::none, now_s, v);
  CHECK(v.expires == now_s + 537);
  pow::challenge_claims claims;
  std::string_view challenge;
  const std::string sent = v.challenge + ":a";
  CHECK(pow.challenger().check(sent, now_s + 537, 0, 0, 0, claims, challenge) !=
        pow::proof_failure::expired);
  CHECK(claims.expires == now_s + 537);
  CHECK(pow.challenger().check(sent, now_s + 538, 0, 0, 0, claims, challenge) ==
        pow::proof_failure::expired);
}

TEST_CASE("gate: a consumer tier moves the required difficulty, never below 8 bits", "[gate]") {
  world w;
  w.violate(1);  // base_bits 3 at one violation
  const auto& c = w.category(w.compiled.categories().front().name.c_str());
  for (const auto& [shift, bits] :
       std::vector<std::pair<int, unsigned>>{{0, 3}, {9, 12}, {-2, 8}}) {
    INFO(shift);
    policy::gate_input in{&c, &w.who, "", now, false};
    in.pow_shift = shift;
    policy::gate_verdict v;
    w.gate.before_limits(in, v);
    REQUIRE(v.result == outcome::challenged);
    CHECK(v.challenge.bits == bits);
  }
}

// Clearance (docs/design.md §16): a signed token a valid proof earns, which waives what the
// client's violations require up to its bits, for its client and its policy, until it expires
// or the client violates again; never a limit.

namespace {

/// A clearance for the client (or `for_whom`) in `name`'s policy earned at `issued` with `bits`.
std::string clearance(const world& w, const char* name, unsigned bits, core::nanos issued = now,
                      core::nanos life = 600 * core::ns_per_s,
                      std::optional<std::uint64_t> for_whom = std::nullopt) {
  return w.pow.clearances().issue({issued, issued + life, static_cast<std::uint8_t>(bits),
                                   for_whom.value_or(w.who.tag), w.category(name).pow.scope});
}

/// One request of `name` carrying `token` as its clearance (and no proof), at `at`.
result run_cleared(world& w, const char* name, const std::string& token, core::nanos at = now) {
  const auto& c = w.category(name);
  policy::gate_input in{&c, &w.who, "", at, false};
  in.clearance = token;
  policy::gate_verdict v;
  w.gate.before_limits(in, v);
  if (!v.ask_limits) return {v.result, false, v};
  std::uint32_t unkeyed = 0;
  const auto req = w.compiled.request(c, w.client, test::fake_request{}.keys(), 1, at, unkeyed);
  const auto d = w.store.decide(req);
  w.gate.after_limits(in, req, d, v);
  return {v.result, true, v};
}

}  // namespace

TEST_CASE("gate: a clearance waives the proof violations require, up to its bits", "[gate]") {
  world w;
  w.violate(1);                                    // 3 bits required
  const core::nanos later = now + core::ns_per_s;  // earned after the violation
  auto r = run_cleared(w, "guarded", clearance(w, "guarded", 3, later), later);
  CHECK(r.answer == outcome::allowed);
  CHECK(r.verdict.effects.cleared);
  CHECK_FALSE(r.verdict.effects.spend);
  // Earned with fewer bits than now required (three violations: 5 bits): a 428.
  w.violate(2);
  const core::nanos after = now + 2 * core::ns_per_s;
  r = run_cleared(w, "guarded", clearance(w, "guarded", 4, after), after);
  CHECK(r.answer == outcome::challenged);
  CHECK(r.verdict.challenge.bits == 5);
  CHECK(run_cleared(w, "guarded", clearance(w, "guarded", 5, after), after).answer ==
        outcome::allowed);
}

TEST_CASE("gate: a clearance is void after a violation, expired, or another client's", "[gate]") {
  world w;
  w.violate(1);
  // Earned before the client's last violation (the violation at `now`).
  const core::nanos before = now - core::ns_per_s;
  CHECK(run_cleared(w, "guarded", clearance(w, "guarded", 6, before), now).answer ==
        outcome::challenged);
  const core::nanos later = now + core::ns_per_s;
  // Expired.
  CHECK(run_cleared(w, "guarded", clearance(w, "guarded", 6, later, core::ns_per_s),
                    later + core::ns_per_s)
            .answer == outcome::challenged);
  // Another client's, or tampered with, or not one at all.
  CHECK(run_cleared(w, "guarded", clearance(w, "guarded", 6, later, 600 * core::ns_per_s, 12345),
                    later)
            .answer == outcome::challenged);
  std::string tampered = clearance(w, "guarded", 6, later);
  tampered[5] = tampered[5] == 'A' ? 'B' : 'A';
  CHECK(run_cleared(w, "guarded", tampered, later).answer == outcome::challenged);
  CHECK(run_cleared(w, "guarded", "not a clearance", later).answer == outcome::challenged);
  CHECK(run_cleared(w, "guarded", clearance(w, "guarded", 6, later), later).answer ==
        outcome::allowed);
}

TEST_CASE("gate: a clearance never pays past a limit", "[gate]") {
  world w;
  w.exhaust("paying");
  const auto r = run_cleared(w, "paying", clearance(w, "paying", 20));
  CHECK(r.answer == outcome::challenged);  // pay to pass asks for a proof, as before
  CHECK_FALSE(r.verdict.effects.cleared);
}

TEST_CASE("clearance: lifetime doubles per bit over base_bits, capped", "[gate]") {
  const std::int64_t base = 600 * core::ns_per_s, max = 86400 * core::ns_per_s;
  CHECK(pow::clearance_lifetime(16, 16, base, max) == base);
  CHECK(pow::clearance_lifetime(18, 16, base, max) == 4 * base);
  CHECK(pow::clearance_lifetime(14, 16, base, max) == base / 4);
  CHECK(pow::clearance_lifetime(40, 16, base, max) == max);
}

TEST_CASE("gate: a required proof (ladder or attack mode) is one violation's, cleared or not",
          "[gate]") {
  world w;
  const auto& c = w.category("guarded");
  auto ask = [&](bool require, std::string_view solution, std::string_view clearance) {
    policy::gate_input in{&c, &w.who, solution, now, false};
    in.require_proof = require;
    in.clearance = clearance;
    policy::gate_verdict v;
    w.gate.before_limits(in, v);
    spend(w, in, v);
    return v;
  };
  // No violation, not required: the limits are asked.
  CHECK(ask(false, "", "").ask_limits);
  // Required: a challenge of the difficulty of one violation (base_bits 3).
  auto v = ask(true, "", "");
  CHECK(v.result == outcome::challenged);
  CHECK(v.challenge.bits == 3);
  // A proof of it pays; a clearance of at least those bits waives it.
  CHECK(ask(true, w.proof("guarded", 3), "").ask_limits);
  v = ask(true, "", clearance(w, "guarded", 3, now - core::ns_per_s));
  CHECK(v.ask_limits);
  CHECK(v.effects.cleared);
  // With violations, the higher of the two requirements: 2 violations ask 4 bits.
  w.violate(2);
  v = ask(true, "", "");
  CHECK(v.challenge.bits == 4);
  // A clearance earned before those violations is void.
  CHECK(ask(true, "", clearance(w, "guarded", 6, now - core::ns_per_s)).result ==
        outcome::challenged);
  // The gate's has_clearance: any valid clearance, whatever its bits.
  policy::gate_input in{&c, &w.who, "", now + 2 * core::ns_per_s, false};
  const std::string after = clearance(w, "guarded", 3, now + core::ns_per_s);
  in.clearance = after;
  CHECK(w.gate.has_clearance(in));
  in.clearance = "nonsense";
  CHECK_FALSE(w.gate.has_clearance(in));
}
