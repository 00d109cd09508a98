#include "gateway/app/override_json.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <array>
#include <cstdio>

#include "gateway/core/calendar.hpp"
#include "gateway/core/units.hpp"

namespace tollgate::app {

namespace {

namespace json = boost::json;

/// The longest key or prefix an override names.
constexpr std::size_t max_key = 256;
/// The largest burst (as in policy files).
constexpr std::uint64_t max_burst = 1'000'000;

/// Digits of `text` at [at, at + n) as a number; -1 when one is not a digit.
int digits(std::string_view text, std::size_t at, std::size_t n) {
  if (at + n > text.size()) return -1;
  int v = 0;
  for (std::size_t i = at; i < at + n; ++i) {
    if (text[i] < '0' || text[i] > '9') return -1;
    v = v * 10 + (text[i] - '0');
  }
  return v;
}

/// `r` as written in policy files ("1000/s").
std::string rate_text(const core::rate& r) {
  const char unit = r.period == core::ns_per_s ? 's' : r.period == 60 * core::ns_per_s ? 'm' : 'h';
  return std::to_string(r.count) + "/" + unit;
}

/// A key or prefix: 1..256 bytes, no control characters.
bool valid_key(std::string_view k) {
  return !k.empty() && k.size() <= max_key && std::none_of(k.begin(), k.end(), [](char c) {
    return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  });
}

/// The numbers of member `name` (`{"rate":"1000/s","burst":2000}`), or nullopt and `error`.
std::optional<policy::override_rule::numbers> numbers_of(const json::value& v,
                                                         std::string_view name,
                                                         std::string& error) {
  const json::object* o = v.if_object();
  if (o == nullptr || o->size() != 2 || !o->contains("rate") || !o->contains("burst")) {
    error = "\"" + std::string(name) + "\" must be {\"rate\": \"N/s|m|h\", \"burst\": N}";
    return std::nullopt;
  }
  const json::string* rate = o->at("rate").if_string();
  const auto parsed = rate != nullptr ? core::parse_rate(*rate) : std::nullopt;
  if (!parsed) {
    error = "\"" + std::string(name) + ".rate\" must be N/s, N/m or N/h";
    return std::nullopt;
  }
  const json::value& b = o->at("burst");
  const std::int64_t burst = b.is_int64() ? b.as_int64() : b.is_uint64() ? 0 : -1;
  if (burst < 1 || static_cast<std::uint64_t>(burst) > max_burst) {
    error = "\"" + std::string(name) + ".burst\" must be a whole number from 1 to 1000000";
    return std::nullopt;
  }
  return policy::override_rule::numbers{*parsed, static_cast<std::uint32_t>(burst)};
}

json::object numbers_json(const policy::override_rule::numbers& n) {
  return {{"rate", rate_text(n.rate)}, {"burst", n.burst}};
}

}  // namespace

std::string rfc3339(core::nanos t) {
  const std::int64_t s = core::detail::floor_div(t, core::ns_per_s);
  const std::int64_t days = core::detail::floor_div(s, core::detail::seconds_per_day);
  const std::int64_t in_day = s - days * core::detail::seconds_per_day;
  // Civil date of `days` since 1970-01-01 (Howard Hinnant's civil_from_days).
  const std::int64_t z = days + 719468;
  const std::int64_t era = core::detail::floor_div(z, 146097);
  const auto doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  const unsigned d = doy - (153 * mp + 2) / 5 + 1;
  const unsigned m = mp < 10 ? mp + 3 : mp - 9;
  const std::int64_t y = static_cast<std::int64_t>(yoe) + era * 400 + (m <= 2 ? 1 : 0);
  std::array<char, 40> buf{};
  std::snprintf(buf.data(), buf.size(), "%04lld-%02u-%02uT%02lld:%02lld:%02lldZ",
                static_cast<long long>(y), m, d, static_cast<long long>(in_day / 3600),
                static_cast<long long>(in_day / 60 % 60), static_cast<long long>(in_day % 60));
  return buf.data();
}

std::optional<core::nanos> parse_rfc3339(std::string_view t) {
  // YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)
  const int y = digits(t, 0, 4), mo = digits(t, 5, 2), d = digits(t, 8, 2);
  const int h = digits(t, 11, 2), mi = digits(t, 14, 2), s = digits(t, 17, 2);
  // Years around 1970 to 2200 (the instant itself is bounded below): unix nanoseconds in 64
  // bits reach 2262.
  if (t.size() < 20 || y < 1969 || y > 2201 || mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 ||
      h > 23 || mi < 0 || mi > 59 || s < 0 || s > 60 || t[4] != '-' || t[7] != '-' ||
      (t[10] != 'T' && t[10] != 't' && t[10] != ' ') || t[13] != ':' || t[16] != ':') {
    return std::nullopt;
  }
  std::size_t at = 19;
  core::nanos fraction = 0;
  if (t[at] == '.') {
    core::nanos scale = core::ns_per_s;
    ++at;
    const std::size_t first = at;
    while (at < t.size() && t[at] >= '0' && t[at] <= '9') {
      scale /= 10;
      fraction += (t[at] - '0') * scale;
      ++at;
    }
    if (at == first) return std::nullopt;
  }
  std::int64_t offset = 0;
  const std::string_view zone = t.substr(at);
  if (zone == "Z" || zone == "z") {
    offset = 0;
  } else if (zone.size() == 6 && (zone[0] == '+' || zone[0] == '-') && zone[3] == ':') {
    const int oh = digits(zone, 1, 2), om = digits(zone, 4, 2);
    if (oh < 0 || oh > 23 || om < 0 || om > 59) return std::nullopt;
    offset = (zone[0] == '+' ? 1 : -1) * (oh * 3600 + om * 60);
  } else {
    return std::nullopt;
  }
  const std::int64_t days =
      core::detail::days_from_civil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d));
  const std::int64_t secs = days * core::detail::seconds_per_day + h * 3600 + mi * 60 + s - offset;
  // From 1970 to the end of 2200 (UTC): what rfc3339() writes, read back the same.
  constexpr std::int64_t end_of_2200 = 7'289'654'400;
  if (secs < 0 || secs >= end_of_2200) return std::nullopt;
  return secs * core::ns_per_s + fraction;
}

std::optional<policy::override_rule> override_from_json(std::string_view body, core::nanos now,
                                                        bool stored, std::string& error) {
  boost::system::error_code ec;
  const json::value v = json::parse(body, ec);
  const json::object* o = ec ? nullptr : v.if_object();
  if (o == nullptr) {
    error = "the body must be a JSON object";
    return std::nullopt;
  }
  for (const auto& [name, value] : *o) {
    static constexpr std::array<std::string_view, 9> known = {
        "limit", "key", "key_prefix", "address", "tier", "short", "long", "expires", "id"};
    const bool ok = std::find(known.begin(), known.end(), std::string_view(name)) != known.end() ||
                    name == "created";
    if (!ok || (!stored && (name == "id" || name == "created"))) {
      error = "unknown member \"" + std::string(name) +
              "\" (limit, key, key_prefix, address, tier, short, long, expires)";
      return std::nullopt;
    }
  }
  auto text = [&](std::string_view name) -> const json::string* {
    const json::value* m = o->if_contains(name);
    return m != nullptr ? m->if_string() : nullptr;
  };
  for (std::string_view name : {"limit", "key", "key_prefix", "address", "tier"}) {
    if (o->contains(name) && text(name) == nullptr) {
      error = "\"" + std::string(name) + "\" must be a string";
      return std::nullopt;
    }
  }
  policy::override_rule r;
  const int targets = o->contains("key") + o->contains("key_prefix") + o->contains("address");
  if (targets != 1) {
    error = "name exactly one of \"key\", \"key_prefix\" and \"address\"";
    return std::nullopt;
  }
  if (const json::string* a = text("address")) {
    r.by = policy::override_rule::target::address;
    const auto block = core::cidr::parse(*a);
    if (!block) {
      error = "\"address\" must be an address or a CIDR block such as 203.0.113.0/24";
      return std::nullopt;
    }
    r.address = *block;
    if (o->contains("limit")) {
      error = "an address override covers every limit of its clients: leave out \"limit\"";
      return std::nullopt;
    }
  } else {
    const bool prefix = o->contains("key_prefix");
    r.by = prefix ? policy::override_rule::target::key_prefix : policy::override_rule::target::key;
    r.key = *text(prefix ? "key_prefix" : "key");
    if (!valid_key(r.key)) {
      error = std::string(prefix ? "\"key_prefix\"" : "\"key\"") +
              " must be 1 to 256 bytes without control characters";
      return std::nullopt;
    }
    const json::string* limit = text("limit");
    if (limit == nullptr || limit->empty()) {
      error = "a key override names its \"limit\"";
      return std::nullopt;
    }
    r.limit = *limit;
  }
  const bool numbers = o->contains("short") || o->contains("long");
  if (o->contains("tier") == numbers) {
    error = "give either \"tier\" or numbers (\"short\" and/or \"long\")";
    return std::nullopt;
  }
  if (const json::string* tier = text("tier")) {
    r.tier = *tier;
    if (r.tier.empty()) {
      error = "\"tier\" must name a tier";
      return std::nullopt;
    }
  }
  if (const json::value* s = o->if_contains("short")) {
    r.short_term = numbers_of(*s, "short", error);
    if (!r.short_term) return std::nullopt;
  }
  if (const json::value* l = o->if_contains("long")) {
    r.long_term = numbers_of(*l, "long", error);
    if (!r.long_term) return std::nullopt;
  }
  if (const json::value* e = o->if_contains("expires"); e != nullptr && !e->is_null()) {
    std::optional<core::nanos> at;
    if (const json::string* es = e->if_string()) {
      at = parse_rfc3339(*es);
    } else if (e->is_int64() && e->as_int64() > 0 && e->as_int64() < 7'258'118'400) {
      at = e->as_int64() * core::ns_per_s;  // unix seconds, before 2200 (as RFC 3339 reads)
    }
    if (!at) {
      error = "\"expires\" must be an RFC 3339 time such as 2027-01-01T00:00:00Z";
      return std::nullopt;
    }
    if (!stored && *at <= now) {
      error = "\"expires\" is in the past";
      return std::nullopt;
    }
    r.expires = *at;
  }
  r.created = now;
  if (stored) {
    const json::string* created = text("created");
    if (const auto c = created != nullptr ? parse_rfc3339(*created) : std::nullopt) r.created = *c;
  }
  r.id = policy::override_id(r.target_text());
  return r;
}

json::object override_json(const policy::override_rule& r) {
  json::object o;
  o["id"] = r.id;
  switch (r.by) {
    case policy::override_rule::target::key:
      o["limit"] = r.limit;
      o["key"] = r.key;
      break;
    case policy::override_rule::target::key_prefix:
      o["limit"] = r.limit;
      o["key_prefix"] = r.key;
      break;
    case policy::override_rule::target::address:
      o["address"] = r.address.to_string();
      break;
  }
  if (!r.tier.empty()) o["tier"] = r.tier;
  if (r.short_term) o["short"] = numbers_json(*r.short_term);
  if (r.long_term) o["long"] = numbers_json(*r.long_term);
  if (r.expires != 0) o["expires"] = rfc3339(r.expires);
  o["created"] = rfc3339(r.created);
  return o;
}

}  // namespace tollgate::app
