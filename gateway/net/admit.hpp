#pragma once
/// The decision every request takes between its head and its answer, whatever carried it (an
/// HTTP/1.1 request in session.cpp, an HTTP/2 stream in h2_stream.cpp): admission's first
/// step, the store's decision, admission's second step, the proof claimed spent. Internal to
/// net/.

#include <chrono>

#include "gateway/admission/admission.hpp"
#include "gateway/limit/held.hpp"
#include "gateway/net/worker.hpp"

namespace tollgate::net {

/// What admission reads for a request served under `snap` on worker `w`.
admission::setting setting_of(worker& w, const snapshot& snap);

/// Admits request `view` under `snap` into `a` and, when the store answers at once (the
/// in-process store always does), takes admission's second step. `ask_store` when the store
/// will answer later: then await_store. `held` takes its places under its limits' max_delayed
/// before the store is asked (docs/design.md §16), and keeps those that hold it.
admission::step admit_view(worker& w, const snapshot& snap, const admission::request_view& view,
                           admission::record& a, limit::held_places& held);

/// Awaits the decision of a store that answers later (Redis, docs/design.md §11) on the
/// worker's event loop, then takes admission's second step. A store that fails to decide
/// gets 503.
task<admission::step> await_store(worker& w, const snapshot& snap, admission::record& a,
                                  limit::held_places& held);

}  // namespace tollgate::net
