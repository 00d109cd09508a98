// The admin API's attack mode (docs/design.md §16): GET /admin/attack-mode lists every
// category that sets attack_mode with its level, baseline and whether it is forced;
// PUT /admin/attack-mode with {"category":"general","level":"high","for":"30m"} forces a level
// (`for` optional: until released); DELETE /admin/attack-mode/<category> returns it to
// automatic. Changes leave an audit line.

#include <boost/json.hpp>

#include "gateway/app/admin_api.hpp"
#include "gateway/app/admin_support.hpp"
#include "gateway/core/units.hpp"

namespace tollgate::app {

namespace {

namespace json = boost::json;
using admin::answer;
using admin::problem;

json::object view_of(const attack_watch::view& v) {
  json::object o{{"category", v.category},    {"level", policy::attack_level_names[v.status.level]},
                 {"forced", v.status.forced}, {"limits", static_cast<double>(v.status.factor)},
                 {"baseline", v.baseline},    {"rate", v.rate}};
  o["until"] = v.status.forced && v.forced_until > 0
                   ? json::value(core::ceil_seconds(v.forced_until))
                   : json::value(nullptr);
  return o;
}

}  // namespace

admin_api::reply admin_api::attack_mode(const request& r, std::string_view target) const {
  if (c_.attack == nullptr) return problem(404, "attack mode is not running");
  if (target.empty()) {
    if (r.method == "GET") {
      json::array list;
      for (const auto& v : c_.attack->list())
        list.push_back(view_of(v));
      return answer(200, json::object{{"categories", std::move(list)}});
    }
    if (r.method != "PUT") return admin::not_allowed("GET, PUT");
    boost::system::error_code ec;
    const json::value body = json::parse(r.body, ec);
    if (ec || !body.is_object()) return problem(400, "the body is not a JSON object");
    std::string category, level_name;
    core::nanos hold = 0;
    for (const auto& [k, value] : body.as_object()) {
      if (!value.is_string()) return problem(400, std::string(k) + ": a string");
      const std::string_view text = value.as_string();
      if (k == "category") {
        category = text;
      } else if (k == "level") {
        level_name = text;
      } else if (k == "for") {
        const auto d = core::parse_duration(text);
        if (!d || *d <= 0 || *d > 30 * 24 * 3600 * core::ns_per_s) {
          return problem(400, "for: a duration such as 30m, at most 720h");
        }
        hold = *d;
      } else {
        return problem(400, "unknown member \"" + admin::printable(k) + "\"");
      }
    }
    const auto level = policy::attack_level_of(level_name);
    if (category.empty()) return problem(400, "category is required");
    if (!level) return problem(400, "level: normal, elevated, high or severe");
    const core::nanos until = hold > 0 ? c_.clock.now() + hold : 0;
    if (const std::string why = c_.attack->force(category, *level, until); !why.empty()) {
      admin::audit(r, "force_attack_mode", admin::printable(category), "", 404);
      return problem(404, why);
    }
    const std::string unshared =
        c_.standing ? c_.standing->share_attack(category, *level, until, c_.clock.now()) : "";
    admin::audit(r, "force_attack_mode", admin::printable(category),
                 "level=" + level_name +
                     (hold > 0 ? " for=" + std::to_string(core::ceil_seconds(hold)) + "s" : "") +
                     shared_detail(c_, unshared),
                 200);
    for (const auto& v : c_.attack->list())
      if (v.category == category) return answer(200, view_of(v));
    return problem(404, "no such category");
  }
  if (r.method != "DELETE") return admin::not_allowed("DELETE");
  const auto category = admin::decoded(target);
  if (!category) return problem(400, "malformed %-escape in the category");
  if (const std::string why = c_.attack->release(*category); !why.empty()) {
    admin::audit(r, "release_attack_mode", admin::printable(*category), "", 404);
    return problem(404, why);
  }
  const std::string unshared =
      c_.standing ? c_.standing->share_attack(*category, policy::standing_entry::released, 0,
                                              c_.clock.now())
                  : "";
  std::string details = shared_detail(c_, unshared);
  if (!details.empty()) details.erase(0, 1);
  admin::audit(r, "release_attack_mode", admin::printable(*category), details, 200);
  for (const auto& v : c_.attack->list())
    if (v.category == *category) return answer(200, view_of(v));
  return problem(404, "no such category");
}

}  // namespace tollgate::app
