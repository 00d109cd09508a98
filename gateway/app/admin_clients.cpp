// The admin API's view of the penalty ladder (docs/design.md §16): GET /admin/clients/<address>
// or /admin/clients/<limit>/<key> shows a client's score and step; DELETE on the same path
// resets them (an audit line). A client is its identity (the `sub` claim) when its requests
// carry one, else its individual address: <limit> names a limit keyed on the sub claim, so
// that an operator finds a signed-in client by the name its limits give it.

#include <boost/json.hpp>

#include "gateway/app/admin_api.hpp"
#include "gateway/app/admin_support.hpp"
#include "gateway/limit/address.hpp"
#include "gateway/policy/tier_memory.hpp"

namespace tollgate::app {

namespace {

namespace json = boost::json;
using admin::answer;
using admin::problem;

/// Whether `spec` keys on the identity's `sub` claim alone.
bool keys_on_identity(const limit::limit_spec& spec) {
  return spec.parts.size() == 1 && spec.parts[0].source == limit::key_source::claim &&
         spec.parts[0].name == "sub";
}

/// The limit called `name` in any category of `snap`, or null.
const limit::limit_spec* limit_named(const net::snapshot& snap, std::string_view name) {
  for (const policy::compiled_policy* p : snap.policies()) {
    for (const policy::category_limits& c : p->categories()) {
      for (const limit::limit_spec& s : c.limits)
        if (s.name == name) return &s;
    }
  }
  return nullptr;
}

}  // namespace

admin_api::reply admin_api::clients(const request& r, std::string_view target) const {
  if (r.method != "GET" && r.method != "DELETE") return admin::not_allowed("GET, DELETE");
  const net::snapshot& snap = *c_.current;
  const pow::penalty_rules* ladder = snap.policy.penalties();
  if (ladder == nullptr) {
    return problem(404, "no penalty ladder is configured (penalties, in a policy file)");
  }
  pow::subject who;
  json::object client;
  if (const auto slash = target.find('/'); slash != std::string_view::npos) {
    const auto limit = admin::decoded(target.substr(0, slash));
    const auto key = admin::decoded(target.substr(slash + 1));
    if (!limit || !key || key->empty())
      return problem(400, "expected /admin/clients/<limit>/<key>");
    const limit::limit_spec* spec = limit_named(snap, *limit);
    if (spec == nullptr)
      return problem(404, "no limit is called '" + admin::printable(*limit) + "'");
    if (!keys_on_identity(*spec)) {
      return problem(400, "the ladder knows a client by its identity, the sub claim: '" +
                              admin::printable(*limit) + "' does not key on it");
    }
    who = policy::tier_memory::client(*key, {});
    client = {{"limit", *limit}, {"key", *key}};
  } else {
    const auto text = admin::decoded(target);
    const auto a = text ? core::address::parse(*text) : std::nullopt;
    if (!a)
      return problem(400, "expected /admin/clients/<address> or /admin/clients/<limit>/<key>");
    who = policy::subjects_of(*a, snap.policy.prefixes()).individual;
    client = {{"address", limit::key_to_string(static_cast<limit::level>(who.level), who.key,
                                               snap.policy.prefixes())}};
  }
  if (r.method == "DELETE") {
    const bool held = c_.pow.penalties().reset(who);
    const std::string unshared =
        c_.standing ? c_.standing->share_clear_client(who, c_.clock.now()) : "";
    admin::audit(r, "reset_client", admin::printable(target),
                 std::string(held ? "held=yes" : "held=no") + shared_detail(c_, unshared), 200);
    client["reset"] = held;
    if (!unshared.empty()) {
      client["shared"] = false;
      client["shared_error"] = unshared + ": this replica only";
    }
    return answer(200, client);
  }
  const core::nanos now = c_.clock.now();
  const pow::standing s = c_.pow.penalties().at(who, now, *ladder);
  client["score"] = s.score;
  if (s.step < 0) {
    client["step"] = nullptr;
  } else {
    client["step"] = pow::penalty_action_name(s.action(*ladder));
    client["step_at"] = ladder->steps[static_cast<std::size_t>(s.step)].at;
  }
  // A timed step's end; a step that lasts while the score holds has none.
  client["until"] = s.until > 0 ? json::value(core::ceil_seconds(s.until)) : json::value(nullptr);
  return answer(200, client);
}

}  // namespace tollgate::app
