// The admin API's operator controls: manual bans, lifting bans, resetting an address or a
// network, the most limited clients. Each change leaves an audit line (admin::audit).

#include <boost/json.hpp>

#include "gateway/app/admin_api.hpp"
#include "gateway/app/admin_support.hpp"
#include "gateway/core/text.hpp"
#include "gateway/core/units.hpp"

namespace tollgate::app {

namespace {

namespace json = boost::json;
using admin::answer;
using admin::problem;

/// What a PUT /admin/bans/... asks for.
struct ban_order {
  core::nanos duration = 0;  ///< 0: not given
  std::string reason;        ///< the operator's note
};

/// Reads a duration written as in configuration ("90s", "1h", "7d").
bool set_duration(ban_order& o, std::string_view text, std::string& error) {
  const auto d = core::parse_duration(text);
  if (!d || *d <= 0) {
    error = "duration: \"" + admin::printable(text) + "\" is not a duration such as 90s, 1h or 7d";
    return false;
  }
  if (*d > admin_api::max_ban) {
    error = "duration: at most 30d";
    return false;
  }
  o.duration = *d;
  return true;
}

bool set_reason(ban_order& o, std::string_view text, std::string& error) {
  const auto n = admin::note(text);
  if (!n) error = "reason: at most 256 bytes, no control characters";
  if (n) o.reason = *n;
  return n.has_value();
}

/// The duration and reason from the query (`?duration=1h&reason=...`) or a JSON body
/// (`{"duration":"1h","reason":"..."}`); nullopt with `error` set when malformed.
std::optional<ban_order> order_of(const admin::request& r, std::string& error) {
  ban_order o;
  const auto params = admin::parameters(r.query, {"duration", "reason"}, error);
  if (!params) return std::nullopt;
  for (const auto& [name, value] : *params) {
    if (!(name == "duration" ? set_duration(o, value, error) : set_reason(o, value, error))) {
      return std::nullopt;
    }
  }
  if (!r.body.empty()) {
    boost::system::error_code ec;
    const json::value v = json::parse(r.body, ec);
    if (ec || !v.is_object()) {
      error = "the body is not a JSON object";
      return std::nullopt;
    }
    for (const auto& [k, value] : v.as_object()) {
      const bool known = k == "duration" || k == "reason";
      if (!known || !value.is_string()) {
        error = known ? std::string(k) + ": a string"
                      : "unknown member \"" + admin::printable(k) + "\"";
        return std::nullopt;
      }
      const std::string_view text = value.as_string();
      if (!(k == "duration" ? set_duration(o, text, error) : set_reason(o, text, error))) {
        return std::nullopt;
      }
    }
  }
  if (o.duration == 0) {
    error = "duration is required (?duration=1h, or {\"duration\":\"1h\"} in the body)";
    return std::nullopt;
  }
  return o;
}

/// The block named by the path's last part, under `prefixes`; nullopt with `error` set.
std::optional<core::key_block> block_of(std::string_view target, const core::level_prefixes& p,
                                        std::string& error) {
  const auto text = admin::decoded(target);
  if (!text) {
    error = "malformed %-escape in the address";
    return std::nullopt;
  }
  return core::key_block::parse(*text, p, error);
}

std::string seconds_field(std::string_view name, core::nanos d) {
  return std::string(name) + "=" + std::to_string(core::ceil_seconds(d)) + "s";
}

/// `name="text"`, the text escaped as in JSON (a log line stays one line).
std::string quoted_field(std::string_view name, std::string_view text) {
  std::string out = std::string(name) + "=\"";
  core::append_json_escaped(out, text, true);
  return out + "\"";
}

std::string reason_field(const std::string& reason) {
  return quoted_field("reason", reason);
}

std::string error_field(const std::string& error) {
  return quoted_field("error", error);
}

/// Says in `body` that a change holds on this replica only, and why, when it does.
void note_unshared(json::object& body, const std::string& unshared) {
  if (unshared.empty()) return;
  body["shared"] = false;
  body["shared_error"] = unshared + ": this replica only";
}

}  // namespace

std::string shared_detail(const admin_context& c, const std::string& unshared) {
  if (c.standing == nullptr || !c.standing->shared()) return {};
  return " replica=" + c.standing->replica() + " shared=" + (unshared.empty() ? "yes" : "no");
}

admin_api::reply admin_api::ban(const request& r, std::string_view target) const {
  std::string error;
  const auto block = block_of(target, c_.current->policy.prefixes(), error);
  const auto order = block ? order_of(r, error) : std::nullopt;
  if (!block || !order) {
    admin::audit(r, "ban", target, error_field(error), 400);
    return problem(400, error);
  }
  const core::nanos now = c_.clock.now();
  const bans::manual_ban b{*block, now, now + order->duration, order->reason};
  const auto placed = c_.pow.manual_bans().place(b, now);
  const std::string name = block->to_string();
  const std::string details = seconds_field("duration", order->duration) +
                              (order->reason.empty() ? "" : " " + reason_field(order->reason));
  if (placed == bans::manual_bans::placed::full) {
    admin::audit(r, "ban", name, details, 409);
    return problem(409, std::to_string(bans::manual_bans::capacity) +
                            " manual bans are in force: lift some first");
  }
  const unsigned status = placed == bans::manual_bans::placed::added ? 201 : 200;
  const std::string unshared = c_.standing ? c_.standing->share_ban(b) : "";
  admin::audit(r, "ban", name, details + shared_detail(c_, unshared), status);
  json::object body{{"address", name},
                    {"kind", "manual"},
                    {"since", now / core::ns_per_s},
                    {"until", core::ceil_seconds(b.until)},
                    {"retry_after", core::ceil_seconds(order->duration)},
                    {"reason", order->reason}};
  note_unshared(body, unshared);
  return answer(status, body);
}

admin_api::reply admin_api::lift(const request& r, std::string_view target) const {
  std::string error;
  const auto& prefixes = c_.current->policy.prefixes();
  const auto block = block_of(target, prefixes, error);
  if (!block) {
    admin::audit(r, "unban", target, error_field(error), 400);
    return problem(400, error);
  }
  const core::nanos now = c_.clock.now();
  json::array kinds;
  // An individual block may carry an automatic ban as well as a manual one: both go.
  const bool v4 = block->family == core::family::v4;
  const unsigned individual = v4 ? prefixes.ipv4_individual : prefixes.ipv6_subnet;
  if (block->prefix == individual) {
    const pow::subject who{block->net, static_cast<std::uint8_t>(v4 ? core::level::ipv4_individual
                                                                    : core::level::ipv6_subnet)};
    if (c_.pow.violations().lift(who, now)) kinds.push_back("automatic");
  }
  if (c_.pow.manual_bans().lift(*block, now)) kinds.push_back("manual");
  // A bare address keeps its own spelling in the answer, as before blocks were accepted.
  const auto text = admin::decoded(target);
  const auto bare =
      text && text->find('/') == std::string::npos ? core::address::parse(*text) : std::nullopt;
  const std::string name = bare ? bare->to_string() : block->to_string();
  const bool lifted = !kinds.empty();
  std::string lifted_kinds;
  for (const auto& k : kinds)
    lifted_kinds += (lifted_kinds.empty() ? "" : ",") + std::string(k.as_string());
  // Shared even when nothing was lifted here: another replica may hold a ban this one missed.
  const std::string unshared = c_.standing ? c_.standing->share_lift(*block, now) : "";
  std::string details = (lifted ? "kinds=" + lifted_kinds : "") + shared_detail(c_, unshared);
  if (!details.empty() && details.front() == ' ') details.erase(0, 1);
  admin::audit(r, "unban", block->to_string(), details, lifted ? 200 : 404);
  if (!lifted) {
    return problem(404, "no ban on " + block->to_string(),
                   {{"address", name},
                    {"lifted", false},
                    {"covered_by", manual_bans_over(*block, now, true)}});
  }
  json::object body{{"address", name}, {"lifted", true}, {"kinds", kinds}};
  note_unshared(body, unshared);
  return answer(200, body);
}

admin_api::reply admin_api::reset(const request& r, std::string_view target) const {
  std::string error;
  const auto& prefixes = c_.current->policy.prefixes();
  const auto block = block_of(target, prefixes, error);
  if (!block) {
    admin::audit(r, "reset", target, error_field(error), 400);
    return problem(400, error);
  }
  const core::nanos now = c_.clock.now();
  const auto f = c_.pow.violations().forget(*block, prefixes, now);
  const std::size_t limiter = c_.store.forget(*block, prefixes);
  const std::string name = block->to_string();
  json::object reset{{"individual_entries", f.individual},
                     {"network_counters", f.network},
                     {"automatic_bans_lifted", f.bans},
                     {"limiter_entries", limiter}};
  std::string details = "violations=" + std::to_string(f.individual + f.network) +
                        " bans=" + std::to_string(f.bans) + " limiter=" + std::to_string(limiter);
  std::string unshared;
  std::optional<std::string> note;
  if (c_.standing != nullptr && c_.standing->shared()) {
    // Redis's limiter state first, so that no replica's next request finds the old tats once
    // the entry tells it to forget its own.
    std::vector<const limit::limit_spec*> specs;
    for (const policy::compiled_policy* p : c_.current->policies()) {
      for (const auto& category : p->categories()) {
        for (const auto& spec : category.limits) {
          if (spec.source == limit::key_source::address) specs.push_back(&spec);
        }
      }
    }
    const auto redis = c_.standing->reset_limits(*block, prefixes, specs);
    unshared = redis.error.empty() ? c_.standing->share_reset(*block, now) : redis.error;
    reset["redis_keys_deleted"] = redis.deleted;
    details += " redis_keys=" + std::to_string(redis.deleted);
    if (!redis.whole) {
      note =
          "the block is too wide to name each client's limiter keys in Redis: those of its "
          "clients expire by themselves";
    }
  } else if (c_.shared_store) {
    note = "limiter state in Redis is not reset (only this replica's in-process fallback)";
  }
  admin::audit(r, "reset", name, details + shared_detail(c_, unshared), 200);
  json::object body{{"address", name},
                    {"reset", std::move(reset)},
                    {"manual_bans", manual_bans_over(*block, now)}};
  if (note) body["note"] = *note;
  note_unshared(body, unshared);
  return answer(200, body);
}

admin_api::reply admin_api::limited(const request& r) const {
  std::string error;
  const auto params = admin::parameters(r.query, {"top"}, error);
  std::size_t top = 10;
  if (params) {
    for (const auto& [name, value] : *params) {
      const auto n = core::parse_uint(value, limit::space_saving::size);
      if (!n || *n == 0) {
        error = "top: a number from 1 to " + std::to_string(limit::space_saving::size);
        break;
      }
      top = *n;
    }
  }
  if (!error.empty()) return problem(400, error);
  const core::nanos now = c_.clock.now();
  limit::rejection_tally::merged m;
  core::nanos window = 60 * core::ns_per_s;
  for (const auto* t : c_.limited) {
    t->add_to(m, now);
    window = t->window();
  }
  const auto& prefixes = c_.current->policy.prefixes();
  auto list = [&](std::vector<limit::space_saving::item> items) {
    json::array out;
    for (const auto& i : limit::top_of(std::move(items), top)) {
      out.push_back(json::object{{"address", limit::key_to_string(i.who.lvl, i.who.key, prefixes)},
                                 {"rejected", i.count},
                                 {"overestimate", i.error}});
    }
    return out;
  };
  return answer(200, json::object{{"window_seconds", window / core::ns_per_s},
                                  {"since", (now / window - 1) * window / core::ns_per_s},
                                  {"addresses", list(std::move(m.addresses))},
                                  {"networks", list(std::move(m.networks))}});
}

}  // namespace tollgate::app
