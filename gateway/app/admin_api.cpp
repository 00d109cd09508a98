#include "gateway/app/admin_api.hpp"

#include <boost/json.hpp>

#include "gateway/app/admin_support.hpp"
#include "gateway/core/text.hpp"
#include "gateway/limit/gcra.hpp"

namespace tollgate::app {

namespace {

namespace json = boost::json;
using admin::answer;
using admin::problem;

}  // namespace

net::admin_server::reply admin_api::handle(const request& r) const {
  constexpr std::string_view bans_path = "/admin/bans/", addresses_path = "/admin/addresses/";
  const std::string_view path = r.path;
  if (path == "/admin/bans" || path == bans_path) {
    if (r.method != "GET") return admin::not_allowed("GET");
    return bans();
  }
  if (path.starts_with(bans_path)) {
    const std::string_view target = path.substr(bans_path.size());
    if (r.method == "PUT") return ban(r, target);
    if (r.method == "DELETE") return lift(r, target);
    return admin::not_allowed("PUT, DELETE");
  }
  if (path.starts_with(addresses_path)) {
    const std::string_view target = path.substr(addresses_path.size());
    if (r.method == "GET") return address(target);
    if (r.method == "DELETE") return reset(r, target);
    return admin::not_allowed("GET, DELETE");
  }
  if (path == "/admin/overrides" || path.starts_with("/admin/overrides/")) {
    return overrides(r);
  }
  if (path == "/admin/attack-mode" || path.starts_with("/admin/attack-mode/")) {
    return attack_mode(
        r, path.substr(std::min(path.size(), std::string_view("/admin/attack-mode/").size())));
  }
  if (path.starts_with("/admin/clients/")) {
    return clients(r, path.substr(std::string_view("/admin/clients/").size()));
  }
  if (path == "/admin/limited") {
    if (r.method != "GET") return admin::not_allowed("GET");
    return limited(r);
  }
  return problem(404, "no such admin resource");
}

admin_api::reply admin_api::bans() const {
  const core::nanos now = c_.clock.now();
  const auto& prefixes = c_.current->policy.prefixes();
  json::array list;
  for (const auto& b : c_.pow.violations().bans(now)) {
    list.push_back(json::object{
        {"address",
         limit::key_to_string(static_cast<limit::level>(b.who.level), b.who.key, prefixes)},
        {"kind", "automatic"},
        {"until", core::ceil_seconds(b.until)},
        {"retry_after", core::ceil_seconds(b.until - now)},
        {"bans", b.bans}});
  }
  for (const auto& b : c_.pow.manual_bans().list(now)) {
    list.push_back(json::object{{"address", b.block.to_string()},
                                {"kind", "manual"},
                                {"since", b.since / core::ns_per_s},
                                {"until", core::ceil_seconds(b.until)},
                                {"retry_after", core::ceil_seconds(b.until - now)},
                                {"reason", b.reason}});
  }
  return answer(200, json::object{{"bans", std::move(list)}});
}

/// Limiter state of every address limit of every category for `a` (the top level's, then each
/// host entry's, which names its `host`): what a request now would see. Limits keyed on
/// anything else are not the address's, and are not shown.
json::array admin_api::limits_of(const core::address& a, core::nanos now) const {
  const auto& snap = *c_.current;
  const auto keys = limit::keys_of(a, snap.policy.prefixes());
  json::array out;
  auto add = [&](const policy::compiled_policy& policy, const std::string* host) {
    for (const auto& c : policy.categories()) {
      for (const auto& [lvl, key] :
           {std::pair{keys.fine, keys.fine_key}, {keys.coarse, keys.coarse_key}}) {
        const limit::limit_spec* spec = c.at_level(lvl);
        if (spec == nullptr) continue;
        const auto state = c_.store.state_of(*spec, key);
        for (int t = 0; t < 2; ++t) {
          const auto& p = spec->tiers[static_cast<std::size_t>(t)];
          if (p.burst == 0) continue;
          const core::nanos tat = state ? std::max(state->tat[t], now) : now;
          json::object o{{"category", c.name},
                         {"level", spec->name},
                         {"tier", limit::tier_name(static_cast<limit::tier>(t))},
                         {"limit", p.burst},
                         {"remaining", limit::gcra_remaining(tat, now, p)},
                         {"reset", core::ceil_seconds(tat)},
                         {"tracked", state.has_value()},
                         {"shadow", spec->shadow}};
          if (host != nullptr) o["host"] = *host;
          out.push_back(std::move(o));
        }
      }
    }
  };
  add(snap.policy, nullptr);
  for (const auto& t : snap.hosts.entries())
    add(t.policy, &t.label);
  return out;
}

json::array admin_api::manual_bans_over(const core::key_block& b, core::nanos now,
                                        bool holding) const {
  json::array out;
  for (const auto& m : c_.pow.manual_bans().list(now)) {
    if (holding && m.block.prefix > b.prefix) continue;
    if (b.overlaps(m.block.family, m.block.net, m.block.prefix)) {
      out.push_back(json::string(m.block.to_string()));
    }
  }
  return out;
}

admin_api::reply admin_api::address(std::string_view target) const {
  const auto text = admin::decoded(target);
  const auto a = text ? core::address::parse(*text) : std::nullopt;
  if (!a) return problem(400, "not an IP address: GET takes one address (DELETE resets a block)");
  const core::nanos now = c_.clock.now();
  const auto& snap = *c_.current;
  const auto& prefixes = snap.policy.prefixes();
  const auto who = policy::subjects_of(*a, prefixes);
  const auto view = c_.pow.violations().describe(who.individual, who.network, now);
  const auto name = [&](const pow::subject& s) {
    return limit::key_to_string(static_cast<limit::level>(s.level), s.key, prefixes);
  };
  json::object reasons;
  const auto& names = snap.policy.violations().names;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::size_t slot = snap.reason_slot[i];
    reasons[names[i]] = slot < view.reasons.size() ? view.reasons[slot] : 0;
  }
  // The ban a request would meet: automatic or manual, whichever ends later.
  json::value ban = nullptr;
  if (const auto until = c_.pow.banned_until(who, now)) {
    ban = json::object{{"until", core::ceil_seconds(*until)},
                       {"retry_after", core::ceil_seconds(*until - now)}};
  }
  const core::key_block self{
      a->family(), who.individual.key,
      limit::prefix_of(static_cast<limit::level>(who.individual.level), prefixes)};
  return answer(200, json::object{{"address", a->to_string()},
                                  {"individual", name(who.individual)},
                                  {"network", name(who.network)},
                                  {"violations", json::object{{"individual", view.individual},
                                                              {"network", view.network},
                                                              {"reasons", std::move(reasons)}}},
                                  {"ban", std::move(ban)},
                                  {"bans", view.bans},
                                  {"manual_bans", manual_bans_over(self, now)},
                                  {"limits", limits_of(*a, now)}});
}

}  // namespace tollgate::app
