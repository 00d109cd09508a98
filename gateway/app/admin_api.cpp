#include "gateway/app/admin_api.hpp"

#include <boost/json.hpp>

#include "gateway/core/text.hpp"
#include "gateway/limit/gcra.hpp"

namespace tollgate::app {

namespace {

namespace json = boost::json;
using reply = net::admin_server::reply;

reply answer(unsigned status, const json::value& body) {
  return {status, json::serialize(body)};
}

reply error(unsigned status, std::string_view message) {
  return answer(status, json::object{{"error", message}});
}

/// The address in the last path segment, %-decoded (IPv6 colons may come escaped).
std::optional<core::address> address_in(std::string_view segment) {
  std::string text;
  if (!core::percent_decode(segment, text)) return std::nullopt;
  return core::address::parse(text);
}

}  // namespace

reply admin_api::handle(std::string_view method, std::string_view path) const {
  constexpr std::string_view bans_path = "/admin/bans", addresses_path = "/admin/addresses/";
  if (path == bans_path || path == "/admin/bans/") {
    if (method != "GET") return error(405, "use GET");
    return bans();
  }
  if (path.starts_with("/admin/bans/")) {
    if (method != "DELETE") return error(405, "use DELETE to lift a ban");
    const auto a = address_in(path.substr(bans_path.size() + 1));
    if (!a) return error(400, "not an IP address");
    return lift(*a);
  }
  if (path.starts_with(addresses_path)) {
    if (method != "GET") return error(405, "use GET");
    const auto a = address_in(path.substr(addresses_path.size()));
    if (!a) return error(400, "not an IP address");
    return address(*a);
  }
  return error(404, "no such admin resource");
}

reply admin_api::bans() const {
  const core::nanos now = clock_.now();
  const auto& prefixes = current_->policy.prefixes();
  json::array list;
  for (const auto& b : pow_.violations().bans(now)) {
    list.push_back(json::object{
        {"address",
         limit::key_to_string(static_cast<limit::level>(b.who.level), b.who.key, prefixes)},
        {"until", core::ceil_seconds(b.until)},
        {"retry_after", core::ceil_seconds(b.until - now)},
        {"bans", b.bans}});
  }
  return answer(200, json::object{{"bans", std::move(list)}});
}

reply admin_api::lift(const core::address& a) const {
  const auto who = policy::subjects_of(a, current_->policy.prefixes());
  const bool lifted = pow_.violations().lift(who.individual, clock_.now());
  return answer(lifted ? 200u : 404u, json::object{{"address", a.to_string()}, {"lifted", lifted}});
}

/// Limiter state of every address limit of every category for `a`: what a request now would
/// see. Limits keyed on anything else are not the address's, and are not shown.
json::array admin_api::limits_of(const core::address& a, core::nanos now) const {
  const auto& snap = *current_;
  const auto keys = limit::keys_of(a, snap.policy.prefixes());
  json::array out;
  for (const auto& c : snap.policy.categories()) {
    for (const auto& [lvl, key] :
         {std::pair{keys.fine, keys.fine_key}, {keys.coarse, keys.coarse_key}}) {
      const limit::limit_spec* spec = c.at_level(lvl);
      if (spec == nullptr) continue;
      const auto state = store_.state_of(*spec, key);
      for (int t = 0; t < 2; ++t) {
        const auto& p = spec->tiers[static_cast<std::size_t>(t)];
        if (p.burst == 0) continue;
        const core::nanos tat = state ? std::max(state->tat[t], now) : now;
        out.push_back(json::object{{"category", c.name},
                                   {"level", spec->name},
                                   {"tier", limit::tier_name(static_cast<limit::tier>(t))},
                                   {"limit", p.burst},
                                   {"remaining", limit::gcra_remaining(tat, now, p)},
                                   {"reset", core::ceil_seconds(tat)},
                                   {"tracked", state.has_value()},
                                   {"shadow", spec->shadow}});
      }
    }
  }
  return out;
}

reply admin_api::address(const core::address& a) const {
  const core::nanos now = clock_.now();
  const auto& snap = *current_;
  const auto& prefixes = snap.policy.prefixes();
  const auto who = policy::subjects_of(a, prefixes);
  const auto view = pow_.violations().describe(who.individual, who.network, now);
  const auto name = [&](const pow::subject& s) {
    return limit::key_to_string(static_cast<limit::level>(s.level), s.key, prefixes);
  };
  json::object reasons;
  const auto& names = snap.policy.violations().names;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::size_t slot = snap.reason_slot[i];
    reasons[names[i]] = slot < view.reasons.size() ? view.reasons[slot] : 0;
  }
  json::value ban = nullptr;
  if (view.banned_until) {
    ban = json::object{{"until", core::ceil_seconds(*view.banned_until)},
                       {"retry_after", core::ceil_seconds(*view.banned_until - now)}};
  }
  return answer(200, json::object{{"address", a.to_string()},
                                  {"individual", name(who.individual)},
                                  {"network", name(who.network)},
                                  {"violations", json::object{{"individual", view.individual},
                                                              {"network", view.network},
                                                              {"reasons", std::move(reasons)}}},
                                  {"ban", std::move(ban)},
                                  {"bans", view.bans},
                                  {"limits", limits_of(a, now)}});
}

}  // namespace tollgate::app
