#include "gateway/app/admin_api.hpp"

#include "gateway/core/text.hpp"
#include "gateway/limit/gcra.hpp"

namespace tollgate::app {

namespace {

using reply = net::admin_server::reply;

reply error(unsigned status, std::string_view message) {
  return {status, std::string(R"({"error":")") + std::string(message) + "\"}"};
}

/// The address in the last path segment, %-decoded (IPv6 colons may come escaped).
std::optional<core::address> address_in(std::string_view segment) {
  std::string text;
  for (std::size_t i = 0; i < segment.size(); ++i) {
    if (segment[i] == '%') {
      if (i + 2 >= segment.size()) return std::nullopt;
      const auto hex = [](char c) {
        if (c >= '0' && c <= '9') return c - '0';
        const char l = static_cast<char>(c | 0x20);
        return l >= 'a' && l <= 'f' ? l - 'a' + 10 : -1;
      };
      const int hi = hex(segment[i + 1]), lo = hex(segment[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      text += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      text += segment[i];
    }
  }
  return core::address::parse(text);
}

std::int64_t unix_seconds_up(core::nanos t) {
  return core::ceil_seconds(t);
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
  std::string out = R"({"bans":[)";
  bool first = true;
  for (const auto& b : pow_.violations().bans(now)) {
    if (!first) out += ',';
    first = false;
    out += R"({"address":")";
    out += limit::key_to_string(static_cast<limit::level>(b.who.level), b.who.key, prefixes);
    out += R"(","until":)";
    core::append_decimal(out, unix_seconds_up(b.until));
    out += R"(,"retry_after":)";
    core::append_decimal(out, core::ceil_seconds(b.until - now));
    out += R"(,"bans":)";
    core::append_decimal(out, b.bans);
    out += '}';
  }
  out += "]}";
  return {200, out};
}

reply admin_api::lift(const core::address& a) const {
  const auto who = policy::subjects_of(a, current_->policy.prefixes());
  const bool lifted = pow_.violations().lift(who.individual, clock_.now());
  std::string out = R"({"address":")" + a.to_string() + R"(","lifted":)";
  out += lifted ? "true}" : "false}";
  return {lifted ? 200u : 404u, out};
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
  std::string out = R"({"address":")" + a.to_string() + R"(","individual":")" +
                    name(who.individual) + R"(","network":")" + name(who.network) +
                    R"(","violations":{"individual":)";
  core::append_decimal(out, view.individual);
  out += R"(,"network":)";
  core::append_decimal(out, view.network);
  out += R"(,"reasons":{)";
  const auto& reasons = snap.policy.violations().names;
  for (std::size_t i = 0; i < reasons.size(); ++i) {
    if (i > 0) out += ',';
    out += '"' + reasons[i] + "\":";
    const std::size_t slot = snap.reason_slot[i];
    core::append_decimal(out, slot < view.reasons.size() ? view.reasons[slot] : 0);
  }
  out += R"(}},"ban":)";
  if (view.banned_until) {
    out += R"({"until":)";
    core::append_decimal(out, unix_seconds_up(*view.banned_until));
    out += R"(,"retry_after":)";
    core::append_decimal(out, core::ceil_seconds(*view.banned_until - now));
    out += '}';
  } else {
    out += "null";
  }
  out += R"(,"bans":)";
  core::append_decimal(out, view.bans);
  // Limiter state of every address limit of every category: what a request now would see.
  out += R"(,"limits":[)";
  bool first = true;
  const auto keys = limit::keys_of(a, prefixes);
  for (const auto& c : snap.policy.categories()) {
    for (const auto& [lvl, key] :
         {std::pair{keys.fine, keys.fine_key}, {keys.coarse, keys.coarse_key}}) {
      const auto& g = c.groups[static_cast<std::size_t>(lvl)];
      if (!g) continue;
      const auto entry = store_.lookup(lvl, key, g->scope);
      for (int t = 0; t < 2; ++t) {
        const auto& p = g->tiers[static_cast<std::size_t>(t)];
        if (p.burst == 0) continue;
        const core::nanos tat = entry ? std::max(entry->tat[t], now) : now;
        if (!first) out += ',';
        first = false;
        out += R"({"category":")" + c.name + R"(","level":")" +
               std::string(limit::level_name(lvl)) + R"(","tier":")" +
               std::string(limit::tier_name(static_cast<limit::tier>(t))) + R"(","limit":)";
        core::append_decimal(out, p.burst);
        out += R"(,"remaining":)";
        core::append_decimal(out, limit::gcra_remaining(tat, now, p));
        out += R"(,"reset":)";
        core::append_decimal(out, unix_seconds_up(tat));
        out += R"(,"tracked":)";
        out += entry ? "true}" : "false}";
      }
    }
  }
  out += "]}";
  return {200, out};
}

}  // namespace tollgate::app
