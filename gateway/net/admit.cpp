#include "gateway/net/admit.hpp"

namespace tollgate::net {

namespace {

/// Counts the time of one limiter decision begun at `start`.
void observe_check(worker& w, std::chrono::steady_clock::time_point start) {
  w.counters.limiter_check.observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
      metrics::limiter_buckets);
}

}  // namespace

admission::setting setting_of(worker& w, const snapshot& snap) {
  return {snap.config,
          snap.policy,
          snap.router,
          &snap.page,
          w.shared.gate,
          w.shared.pow,
          snap.jwt.get(),
          w.token_cache_for(snap),
          w.inflight,
          w.shared.tiers_set.get(),
          w.overrides_for(snap),
          &snap.attack,
          w.scaled_for(snap)};
}

admission::step admit_view(worker& w, const snapshot& snap, const admission::request_view& view,
                           admission::record& a, limit::held_places& held) {
  const admission::setting s = setting_of(w, snap);
  const admission::step step =
      admission::spend_claimed(w.shared.pow, s, admission::admit(s, view, a), a);
  if (step != admission::step::ask_store) return step;
  a.limits.home = w.index;
  held.take(w.held, a.limits);
  const auto start = std::chrono::steady_clock::now();
  if (!w.shared.store.try_decide(a.limits, a.decision)) return step;
  observe_check(w, start);
  held.keep(a.decision.held);
  return admission::spend_claimed(w.shared.pow, s, admission::after_store(s, a), a);
}

task<admission::step> await_store(worker& w, const snapshot& snap, admission::record& a,
                                  limit::held_places& held) {
  const auto start = std::chrono::steady_clock::now();
  auto [ec] = co_await store::async_decide(w.shared.store, a.limits, a.decision, use_tuple);
  observe_check(w, start);
  if (ec) {
    held.release();
    co_return admission::store_failed(a);
  }
  held.keep(a.decision.held);
  const admission::setting s = setting_of(w, snap);
  co_return admission::spend_claimed(w.shared.pow, s, admission::after_store(s, a), a);
}

}  // namespace tollgate::net
