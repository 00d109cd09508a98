#include "gateway/net/accounting.hpp"

#include <spdlog/spdlog.h>

#include "gateway/net/access_line.hpp"
#include "gateway/net/forward.hpp"
#include "gateway/net/websocket.hpp"

namespace tollgate::net {

namespace {

/// The counters of rejections by limit `l` of category label `c` of the request in hand, by
/// its consumer tier when it has one (docs/design.md §15).
metrics::limit_rejections& rejections(worker& w, const snapshot& snap, const admission::record& a,
                                      std::size_t category, std::size_t c, std::size_t l) {
  const std::uint8_t tier = a.consumer_tier;
  // Made when this worker adopted the request's snapshot, whose policy has tiers.
  metrics::tiered_rejections* tiered = w.counters.rate_limited_tiered.get();
  if (tier == policy::no_tier || tiered == nullptr) return w.counters.rate_limited[c][l];
  return (*tiered)[c][l][snap.tier_metric[category][tier]];
}

/// Counts what the limits did to the request in hand: the binding rejection (enforced, or
/// shadowed) and the limits its keys were missing for; a rejection by a limit is noted for
/// GET /admin/limited. `category` is its category's index in `snap`, `c` its label.
void count_limits(worker& w, const snapshot& snap, const admission::record& a, std::size_t category,
                  std::size_t c) {
  const auto& labels = snap.limit_metric[category];
  const limit::decision& d = a.decision;
  auto count = [&](std::uint8_t index, metrics::limit_mode mode) {
    const limit::limit_outcome& o = d.limits[index];
    const limit::limit_spec& spec = *a.limits.groups[o.group].spec;
    const std::size_t tier =
        spec.is_quota() ? metrics::quota_tier : static_cast<std::size_t>(o.tier);
    rejections(w, snap, a, category, c, labels[spec.slot])[tier][static_cast<std::size_t>(mode)]
        .add();
  };
  if (!d.admitted && d.binding != limit::no_binding) count(d.binding, metrics::limit_mode::enforce);
  if (d.shadow_limited) count(d.shadow_binding, metrics::limit_mode::shadow);
  for (std::uint32_t bits = a.unkeyed; bits != 0; bits &= bits - 1) {
    w.counters.unkeyed[c][labels[static_cast<std::size_t>(__builtin_ctz(bits))]].add();
  }
  const core::outcome o = a.fx.outcome;
  if (o == core::outcome::limited || o == core::outcome::challenged) {
    w.limited.note({a.who.individual.key, static_cast<limit::level>(a.who.individual.level)},
                   {a.who.network.key, static_cast<limit::level>(a.who.network.level)}, a.gate.now);
  }
}

/// The label of tollgate_websocket_upgrades_refused_total for an upgrade refused with `o`.
metrics::upgrade_refusal refusal_of(core::outcome o) noexcept {
  switch (o) {
    case core::outcome::banned:
      return metrics::upgrade_refusal::banned;
    case core::outcome::challenged:
      return metrics::upgrade_refusal::challenged;
    default:
      return metrics::upgrade_refusal::limited;
  }
}

/// One access log line for request `a` served under `snap` that ended as `e`, `seconds` after
/// its head came, built in `line`.
void log_access(worker& w, const snapshot& snap, const admission::record& a, const exchange_end& e,
                double seconds, std::string& line) {
  // The binding limit: the one that rejected, or, forwarded past a shadowed limit, that one;
  // none when no limit was in the way.
  std::string limit;
  const policy::rate_limit_fields& rate = a.rate;
  if (!rate.shadow.empty()) {
    limit = rate.shadow;
  } else if (rate.present && !rate.retry_after.empty()) {
    limit = std::string(rate.level) + "." + std::string(rate.tier);
  }
  const std::string client = a.client.to_string();
  const bool forwarded = e.upstream_seconds >= 0;
  line.clear();
  append_access_line(line, snap.config.logging.format == config::logging_config::log_format::json,
                     std::chrono::system_clock::now(),
                     {client, e.method, e.target, e.version, e.status, a.category().name,
                      core::outcome_name(a.fx.outcome), limit, a.rate.consumer_tier,
                      a.penalty == pow::penalty_action::none ? std::string_view()
                                                             : pow::penalty_action_name(a.penalty),
                      forwarded ? std::string_view(snap.config.upstreams[a.route->upstream].name)
                                : std::string_view(),
                      e.upstream_seconds, e.bytes, seconds});
  w.shared.access_log->write(line);
}

}  // namespace

void apply_effects(worker& w, const snapshot& snap, const admission::record& a) {
  const admission::effects& fx = a.fx;
  if (a.route == nullptr) return;  // refused before a route: not counted by category
  const std::size_t category = snap.index_of(a.category());
  const std::size_t c = snap.category_metric[category];
  w.counters.requests[c][static_cast<std::size_t>(fx.outcome)].add();
  if (fx.gate.verification) {
    w.counters.pow_verifications[static_cast<std::size_t>(*fx.gate.verification)].add();
  }
  if (fx.gate.extra_valid) w.counters.pow_verifications[0].add();
  if (fx.gate.cleared) w.counters.pow_clearances[1].add();
  if (!a.clearance.empty()) w.counters.pow_clearances[0].add();
  if (fx.gate.pow_failed) {
    record_violation(w, snap, a, snap.policy.violations().pow_failed, a.gate.now);
  }
  if (a.token_checked) {
    w.counters.token_checks[a.token_cached ? 0 : 1 + static_cast<std::size_t>(a.token)].add();
  }
  if (fx.token_invalid) {
    record_violation(w, snap, a, snap.policy.violations().token_invalid, a.gate.now);
  }
  if (fx.outcome == core::outcome::challenged) w.counters.pow_challenges[c].add();
  if (fx.outcome == core::outcome::limited) {
    // The gateway's own 429s count on the penalty ladder when it gives them points.
    if (const pow::penalty_rules* ladder = snap.policy.penalties()) {
      add_points(w, snap, a, ladder->rate_limited, "rate_limited", a.gate.now);
    }
  }
  if (fx.upgrade_refused) {
    w.counters
        .ws_refused[snap.metric_of(a.category())][static_cast<std::size_t>(refusal_of(fx.outcome))]
        .add();
  }
  if (a.verdict.limits_checked) count_limits(w, snap, a, category, c);
}

void count_refused_upgrade(worker& w, const request_in_hand& r, metrics::upgrade_refusal why) {
  w.counters.ws_refused[r.snap->metric_of(r.adm.category())][static_cast<std::size_t>(why)].add();
}

/// Phase 5, once the response to the request in hand is sent (its last byte: `written` so
/// far on the connection): counts it by status class and time (tollgate_responses_total,
/// tollgate_request_duration_seconds) and logs it when the access log is on (nothing is
/// formatted per request otherwise).
void finish_exchange(worker& w, const snapshot& snap, const admission::record& a,
                     const exchange_end& e, std::string& line) {
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - e.started).count();
  const std::size_t c = snap.metric_of(a.category());
  if (e.status != 0) w.counters.responses[c][metrics::code_class_of(e.status)].add();
  w.counters.request_duration[c].observe(seconds, metrics::request_buckets);
  if (snap.config.logging.access_log_on() && w.shared.access_log != nullptr) {
    log_access(w, snap, a, e, seconds, line);
  }
}

void finish_request(worker& w, connection_scratch& sc, std::uint64_t written) {
  const request_in_hand& r = sc.request;
  const auto& req = r.parser->get();
  // The scratch's head buffer is free once the response is sent: the line is built there.
  finish_exchange(w, *r.snap, r.adm,
                  {sv(req.method_string()), sv(req.target()), r.version, sc.status, r.started,
                   r.upstream_seconds, written - r.written_before},
                  sc.head);
}

}  // namespace tollgate::net
