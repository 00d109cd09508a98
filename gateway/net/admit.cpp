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

namespace {

/// The step after `taken` when it claimed a proof: spent here at once when this process alone
/// judges proofs; shared across replicas, ask_store with the spend pending (await_store).
admission::step spend_or_defer(worker& w, const admission::setting& s, admission::step taken,
                               admission::record& a) {
  if (!admission::proof_claimed(a)) return taken;
  if (w.shared.standing == nullptr) return admission::spend_claim(w.shared.pow, s, taken, a);
  a.spend_pending = true;
  a.spend_then = taken;
  return admission::step::ask_store;
}

/// Spends the proof `a` claimed across replicas (docs/design.md §18): first in this process's
/// replay cache (a proof spent here is lost without asking Redis), then in Redis, where exactly
/// one replica's SET NX finds it unspent. When Redis cannot say in time, this process's word
/// stands, or with fail_mode closed the request gets 503.
task<admission::step> spend_shared(worker& w, const admission::setting& s, admission::record& a) {
  a.spend_pending = false;
  const admission::step taken = a.spend_then;
  const policy::proof& p = a.verdict.sent;
  if (!policy::commit_proof(w.shared.pow, p, a.gate.now / core::ns_per_s)) {
    co_return admission::settle_claim(w.shared.pow, s, taken, a, false);
  }
  auto token = use_tuple;
  auto [ec, fresh] =
      co_await asio::async_initiate<decltype(token), void(boost::system::error_code, bool)>(
          [&w, &p](auto handler) {
            // Answered on the journal's thread: the coroutine resumes on this worker's.
            auto h = std::make_shared<decltype(handler)>(std::move(handler));
            w.shared.standing->spend(
                p.challenge, p.claims.expires,
                [ex = w.io.get_executor(), h](boost::system::error_code ec, bool fresh) {
                  asio::post(ex, [h, ec, fresh] { std::move (*h)(ec, fresh); });
                });
          },
          token);
  if (ec) {
    if (w.shared.standing->closed()) co_return admission::store_failed(a);
    fresh = true;  // this replica spent it; the others may not know
  }
  co_return admission::settle_claim(w.shared.pow, s, taken, a, fresh);
}

}  // namespace

admission::step admit_view(worker& w, const snapshot& snap, const admission::request_view& view,
                           admission::record& a, limit::held_places& held) {
  const admission::setting s = setting_of(w, snap);
  a.spend_pending = false;
  const admission::step step = spend_or_defer(w, s, admission::admit(s, view, a), a);
  if (step != admission::step::ask_store || a.spend_pending) return step;
  a.limits.home = w.index;
  held.take(w.held, a.limits);
  const auto start = std::chrono::steady_clock::now();
  if (!w.shared.store.try_decide(a.limits, a.decision)) return step;
  observe_check(w, start);
  held.keep(a.decision.held);
  return spend_or_defer(w, s, admission::after_store(s, a), a);
}

task<admission::step> await_store(worker& w, const snapshot& snap, admission::record& a,
                                  limit::held_places& held) {
  const admission::setting s = setting_of(w, snap);
  if (a.spend_pending) {
    // A proof claimed before the store was asked: spent first, then the limits, if they are
    // still to be asked.
    const admission::step step = co_await spend_shared(w, s, a);
    if (step != admission::step::ask_store) co_return step;
    a.limits.home = w.index;
    held.take(w.held, a.limits);
    if (w.shared.store.try_decide(a.limits, a.decision)) {
      held.keep(a.decision.held);
      const admission::step next = spend_or_defer(w, s, admission::after_store(s, a), a);
      if (!a.spend_pending) co_return next;
      co_return co_await spend_shared(w, s, a);
    }
  }
  const auto start = std::chrono::steady_clock::now();
  auto [ec] = co_await store::async_decide(w.shared.store, a.limits, a.decision, use_tuple);
  observe_check(w, start);
  if (ec) {
    held.release();
    co_return admission::store_failed(a);
  }
  held.keep(a.decision.held);
  const admission::step step = spend_or_defer(w, s, admission::after_store(s, a), a);
  if (!a.spend_pending) co_return step;
  co_return co_await spend_shared(w, s, a);
}

}  // namespace tollgate::net
