#pragma once
/// Admission: what the gateway does with a well-framed request head before any byte goes
/// upstream (docs/design.md §5 "Order of decisions"), as values. Given a request_view it
/// answers with a step: a local answer, "ask the store about these limits" (then
/// after_store), or "forward"; the record says why, and its `effects` what the caller counts
/// and records. It covers the upgrade rules, the path and the route, the client's address,
/// the access lists (deny first, before any proof is looked at), CORS preflights, the proof
/// (header or cookie) and both steps of the gate. No sockets, no HTTP library types, no
/// metrics: the gateway (net/session.cpp) and the simulator (sim/simulator.cpp) call the same
/// functions, and tests call them with strings. Model: Envoy's decodeHeaders of its
/// local_ratelimit filter, flat steps returning a status.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "gateway/admission/request_view.hpp"
#include "gateway/config/gateway.hpp"
#include "gateway/core/outcome.hpp"
#include "gateway/identity/jwt.hpp"
#include "gateway/identity/token_cache.hpp"
#include "gateway/limit/inflight.hpp"
#include "gateway/limit/request.hpp"
#include "gateway/policy/challenge_page.hpp"
#include "gateway/policy/compiled_policy.hpp"
#include "gateway/policy/cors.hpp"
#include "gateway/policy/gate.hpp"
#include "gateway/policy/overrides.hpp"
#include "gateway/policy/pow_gate.hpp"
#include "gateway/policy/router.hpp"
#include "gateway/policy/verdict.hpp"

namespace tollgate::admission {

/// What admission reads: one configuration, compiled, and the process's proof-of-work state.
struct setting {
  const config::gateway_config& config;   ///< access lists, trusted proxies
  const policy::compiled_policy& policy;  ///< categories, address levels
  const policy::router& router;           ///< routes
  const policy::challenge_page* page;     ///< the browsers' 428 page; null: JSON only
  const policy::gate& gate;               ///< bans, proofs, violations' requirements
  const policy::pow_state& pow;           ///< checks the proofs a cookie carries
  /// Verifies tokens (docs/design.md §15); null when the configuration has no identity.jwt.
  const identity::verifier* jwt = nullptr;
  /// This worker's memory of verified tokens; null: every token verified.
  identity::token_cache* tokens = nullptr;
  /// The places in flight of every worker (concurrency limits, docs/design.md §15); null:
  /// concurrency limits are not applied (the simulator).
  limit::inflight_table* inflight = nullptr;
  /// The tiers upstreams set (the `upstream` tier source, docs/design.md §15); null: none.
  policy::tier_memory* tiers_set = nullptr;
  /// The admin API's overrides compiled for this configuration (docs/design.md §15); null, or
  /// pointing at null: none.
  const std::shared_ptr<const policy::override_set>* overrides = nullptr;
  /// Every category's attack mode status (docs/design.md §16); null: none applies.
  const policy::attack_board* attack = nullptr;
  /// This worker's limits scaled by attack mode; null: scaled per request.
  policy::scaled_cache* scaled = nullptr;
};

/// What the caller does next.
enum class step : std::uint8_t {
  answer,     ///< send record::reply
  ask_store,  ///< have the store decide record::limits into record::decision, then after_store
  forward     ///< send the request to record::route's upstream
};

/// An answer the gateway makes itself. Its strings keep their capacity request after request.
struct answer {
  std::uint16_t status = 200;     ///< its status
  std::string body;               ///< problem+json, or the browsers' page; "" for none
  std::string fields;             ///< further header lines, each ending in CRLF
  std::string_view content_type;  ///< "": application/problem+json
  bool rate_fields = false;       ///< also carries record::rate (docs/design.md §4)
  bool keep_open = false;         ///< the connection may stay open afterwards
};

/// What the caller does besides answering: what to count and what to record.
struct effects {
  core::outcome outcome = core::outcome::allowed;  ///< the request's outcome label (a
                                                   ///< challenge issued when `challenged`)
  policy::gate_effects gate;     ///< proof results to count, a violation to record
  bool upgrade_refused = false;  ///< an upgrade was refused (by outcome): count it
  bool token_invalid = false;    ///< record a token_invalid violation against the client
};

/// Everything admission learnt of one request. Lives as long as the request (in the
/// connection's scratch in the gateway) and is reused: its strings keep their capacity.
struct record {
  const policy::route* route = nullptr;  ///< its route; null when refused before one
  core::address client;                  ///< the address it is charged to (docs/design.md §7)
  policy::client_subjects who;           ///< the client as the violation tables know it
  /// The verified token's claims (docs/design.md §15); null: anonymous.
  std::shared_ptr<const identity::claims> identity;
  identity::failure token = identity::failure::none;  ///< why its token was refused, if it was
  std::uint8_t consumer_tier = policy::no_tier;       ///< its consumer tier (docs/design.md §15)
  bool token_checked = false;                         ///< it carried a token, which was checked
  bool token_cached = false;     ///< and answered from the worker's memory of tokens
  policy::gate_input gate;       ///< what the gate was told
  policy::gate_verdict verdict;  ///< what the gate answered
  limit::limit_request limits;   ///< what the store is asked (step ask_store)
  limit::decision decision;      ///< the store's decision on them
  /// Its places under concurrency limits, held while it is in flight: given back when it is
  /// refused, and by the caller when it ends (or a WebSocket tunnel takes them).
  limit::inflight_holds inflight;
  /// The overrides whose limits r.limits points at, while it does.
  std::shared_ptr<const policy::override_set> overrides;
  /// Its client's place on the penalty ladder (docs/design.md §16), when there is one.
  pow::standing standing;
  pow::penalty_action penalty = pow::penalty_action::none;  ///< that step's action
  /// Its category's attack mode (docs/design.md §16) as the request met it.
  policy::attack_status attack;
  /// Its limits scaled by attack mode, from the worker's cache, while r.limits points at them.
  std::shared_ptr<const policy::scaled_set> scaled;
  /// ... or, without a cache, copies of them.
  std::array<limit::limit_spec, limit::max_groups> scaled_copies;
  std::uint32_t unkeyed = 0;  ///< slots of limits whose key it lacks
  bool exempt = false;        ///< on the access allow list
  bool upgrade = false;       ///< a WebSocket upgrade
  bool tls = false;           ///< came over TLS
  bool pow_cookie = false;    ///< carried the proof cookie: the answer clears it
  /// The clearance its proof earned (docs/design.md §16), sent back on the answer; "" for none.
  std::string clearance;
  std::int64_t clearance_seconds = 0;        ///< its lifetime, the cookie's Max-Age
  const policy::cors_rules* cors = nullptr;  ///< its category's CORS, when the gateway owns it
  std::string_view cors_origin;              ///< its Origin when `cors` allows it; else ""
  const header_source* headers = nullptr;    ///< its fields, alive as long as the request
  bool keep_alive = true;                    ///< the client asked to keep the connection
  bool body_done = true;                     ///< nothing is left to read after the head
  std::string path;                          ///< its normalised path
  policy::rate_limit_fields rate;            ///< the rate-limit fields (docs/design.md §4)
  answer reply;                              ///< the local answer (step answer)
  effects fx;                                ///< to apply
  /// The gateway's: a proof claimed waits to be spent across replicas (docs/design.md §18),
  /// and the step to take once it is (net/admit.cpp).
  bool spend_pending = false;
  step spend_then = step::answer;

  /// The category it was routed to; route must be set.
  const policy::category_limits& category() const noexcept { return *route->category; }
};

/// Admits request `v` into `r` (whose previous contents go): the first step.
step admit(const setting& s, const request_view& v, record& r);
/// The second step, once the store decided r.limits into r.decision.
step after_store(const setting& s, record& r);
/// Whether the step just taken claimed a proof: the caller spends it now
/// (policy::commit_proof on record::verdict.sent), before going on, so that a proof pays once
/// however many requests carry it at the same instant; when another request spent it first,
/// proof_lost gives the step instead.
inline bool proof_claimed(const record& r) noexcept {
  return r.verdict.effects.spend;
}
/// The step when the proof claimed was spent by another request first.
step proof_lost(const setting& s, record& r);
/// The caller's part once the proof step `taken` claimed was spent (`spent`) or found spent by
/// another request first: `taken`, with the clearance it earned, or proof_lost's step.
step settle_claim(policy::pow_state& pow, const setting& s, step taken, record& r, bool spent);
/// The caller's part for both: spends the proof step `taken` claimed in `pow`'s replay cache;
/// `taken` stands, or when another request spent it first, proof_lost's step.
step spend_claim(policy::pow_state& pow, const setting& s, step taken, record& r);
/// spend_claim when step `taken` claimed a proof (rarely: inline for the rest).
inline step spend_claimed(policy::pow_state& pow, const setting& s, step taken, record& r) {
  return proof_claimed(r) ? spend_claim(pow, s, taken, r) : taken;
}
/// The answer when the store, asked after step ask_store, could not decide (503).
step store_failed(record& r);
/// The answer to an admitted upgrade whose client holds its category's
/// max_connections_per_address already (429).
step tunnels_full(record& r);

/// The client as the tiers upstreams set know it: its verified identity's `sub`, else its
/// individual address (docs/design.md §15).
inline pow::subject consumer(const record& r) {
  const std::string_view sub =
      r.identity && !r.identity->values.empty() ? std::string_view(r.identity->values[0]) : "";
  return policy::tier_memory::client(sub, r.who.individual);
}

/// Appends the gateway's own fields to a response to `r`, whoever made it (the gateway or the
/// upstream): the proof cookie cleared once judged, CORS where the gateway owns it.
void append_own_fields(const record& r, std::string& out);

}  // namespace tollgate::admission
