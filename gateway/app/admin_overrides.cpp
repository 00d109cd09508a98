// The admin API's overrides (docs/design.md §15, "Overrides"): list, put, delete.

#include <boost/json.hpp>

#include "gateway/app/admin_api.hpp"
#include "gateway/app/admin_support.hpp"
#include "gateway/core/text.hpp"

namespace tollgate::app {

namespace {

namespace json = boost::json;
using admin::answer;
using admin::problem;

/// The audit line's fields of `r`: what it covers and gives, and until when.
std::string details_of(const policy::override_rule& r) {
  std::string out = "covers=\"";
  core::append_json_escaped(out, r.target_text(), true);
  out += "\"";
  if (!r.tier.empty()) out += " tier=" + admin::printable(r.tier);
  if (r.short_term) {
    out += " short=" + std::to_string(r.short_term->rate.count) + "," +
           std::to_string(r.short_term->burst);
  }
  if (r.long_term) {
    out += " long=" + std::to_string(r.long_term->rate.count) + "," +
           std::to_string(r.long_term->burst);
  }
  if (r.expires != 0) out += " expires=" + rfc3339(r.expires);
  return out;
}

}  // namespace

admin_api::reply admin_api::overrides(const request& r) const {
  constexpr std::string_view one = "/admin/overrides/";
  if (r.path.starts_with(one)) {
    const std::string_view id = r.path.substr(one.size());
    if (r.method != "DELETE") return admin::not_allowed("DELETE");
    return delete_override(r, id);
  }
  if (r.method == "PUT") return put_override(r);
  if (r.method != "GET") return admin::not_allowed("GET, PUT");
  json::array list;
  for (const policy::override_rule& o : c_.overrides->book().list(c_.clock.now()))
    list.push_back(override_json(o));
  return answer(200,
                json::object{{"overrides", std::move(list)}, {"shared", c_.overrides->shared()}});
}

admin_api::reply admin_api::put_override(const request& r) const {
  std::string error;
  auto rule = override_from_json(r.body, c_.clock.now(), false, error);
  if (rule) {
    // It must mean something under the configuration in force.
    error = policy::check_rule(*rule, c_.current->policies());
    if (!error.empty()) rule.reset();
  }
  if (!rule) {
    std::string details = "error=\"";
    core::append_json_escaped(details, error, true);
    admin::audit(r, "override", "-", details + "\"", 400);
    return problem(400, error);
  }
  const std::string& target = rule->id;
  const auto put = c_.overrides->put(*rule);
  if (!put.error.empty()) {
    admin::audit(r, "override", target, details_of(*rule), 503);
    return problem(503, "the override was not stored: " + put.error);
  }
  if (put.placed == policy::override_book::placed::full) {
    admin::audit(r, "override", target, details_of(*rule), 409);
    return problem(409, std::to_string(policy::override_book::capacity) +
                            " overrides are in force: delete some first");
  }
  admin::audit(r, "override", target,
               details_of(*rule) +
                   (put.placed == policy::override_book::placed::replaced ? " replaced=yes" : ""),
               200);
  return answer(200, override_json(*rule));
}

admin_api::reply admin_api::delete_override(const request& r, std::string_view id) const {
  const auto rule = c_.overrides->book().get(id);
  if (!rule) {
    admin::audit(r, "override_delete", id, "", 404);
    return problem(404, "no override has id '" + admin::printable(id) + "'");
  }
  if (std::string error = c_.overrides->remove(id); !error.empty()) {
    admin::audit(r, "override_delete", id, details_of(*rule), 503);
    return problem(503, "the override was not deleted: " + error);
  }
  admin::audit(r, "override_delete", id, details_of(*rule), 200);
  json::object body = override_json(*rule);
  body["deleted"] = true;
  return answer(200, body);
}

}  // namespace tollgate::app
