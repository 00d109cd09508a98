#include "gateway/net/access_line.hpp"

#include <cstdio>

#include "gateway/core/log_file.hpp"
#include "gateway/core/text.hpp"

namespace tollgate::net {

namespace {

/// Appends `s` for a text line: printable ASCII as it is, anything else (spaces, quotes and
/// backslashes included) as \xHH, so that a hostile target cannot end the line, forge another,
/// or shift the fields after it.
void append_visible(std::string& out, std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u > 0x20 && u < 0x7f && c != '\\' && c != '"') {
      out += c;
    } else {
      out += "\\x";
      out += hex[u >> 4];
      out += hex[u & 15];
    }
  }
}

/// Appends `"name":"value"` (after a comma), or `"name":null` when `value` is empty and
/// `null_if_empty`.
void json_text(std::string& out, std::string_view name, std::string_view value,
               bool null_if_empty = false) {
  out += ",\"";
  out += name;
  out += "\":";
  if (null_if_empty && value.empty()) {
    out += "null";
    return;
  }
  out += '"';
  core::append_json_escaped(out, value, true);
  out += '"';
}

void json_number(std::string& out, std::string_view name, std::uint64_t value) {
  out += ",\"";
  out += name;
  out += "\":";
  core::append_decimal(out, static_cast<std::int64_t>(value));
}

/// Appends seconds with microseconds (no exponent, whatever the value).
void append_seconds(std::string& out, double seconds) {
  char buf[32];
  const int n = std::snprintf(buf, sizeof buf, "%.6f", seconds < 0 ? 0.0 : seconds);
  out.append(buf, static_cast<std::size_t>(n));
}

void json_seconds(std::string& out, std::string_view name, double seconds) {
  out += ",\"";
  out += name;
  out += "\":";
  if (seconds < 0) {
    out += "null";
  } else {
    append_seconds(out, seconds);
  }
}

/// The start both json lines share: time, type, client, method and path.
void json_start(std::string& out, std::chrono::system_clock::time_point now, std::string_view type,
                std::string_view client, std::string_view method, std::string_view target) {
  out += "{\"time\":\"";
  core::append_utc_time(out, now);
  out += "\",\"type\":\"";
  out += type;
  out += '"';
  json_text(out, "client", client);
  json_text(out, "method", method);
  json_text(out, "path", target);
}

/// The start both text lines share: `TIME access CLIENT "METHOD TARGET`.
void text_start(std::string& out, std::chrono::system_clock::time_point now,
                std::string_view client, std::string_view method, std::string_view target) {
  core::append_utc_time(out, now);
  out += " access ";
  append_visible(out, client);
  out += " \"";
  append_visible(out, method);
  out += ' ';
  append_visible(out, target);
}

}  // namespace

void append_access_line(std::string& out, bool json, std::chrono::system_clock::time_point now,
                        const access_entry& e) {
  const std::string_view protocol =
      e.version == 10 ? "HTTP/1.0" : (e.version == 20 ? "HTTP/2.0" : "HTTP/1.1");
  if (json) {
    json_start(out, now, "access", e.client, e.method, e.target);
    json_text(out, "protocol", protocol);
    if (e.status == 0) {
      out += ",\"status\":null";
    } else {
      json_number(out, "status", e.status);
    }
    json_text(out, "category", e.category);
    json_text(out, "decision", e.decision);
    json_text(out, "limit", e.limit, true);
    if (!e.consumer_tier.empty()) json_text(out, "consumer_tier", e.consumer_tier);
    if (!e.step.empty()) json_text(out, "step", e.step);
    json_text(out, "upstream", e.upstream, true);
    json_seconds(out, "upstream_time", e.upstream_seconds);
    json_number(out, "bytes", e.bytes);
    json_seconds(out, "duration", e.seconds);
    out += "}\n";
    return;
  }
  text_start(out, now, e.client, e.method, e.target);
  out += ' ';
  out += protocol;
  out += "\" ";
  core::append_decimal(out, e.status);
  out += " category=";
  append_visible(out, e.category);
  out += " decision=";
  out += e.decision;
  out += " limit=";
  if (e.limit.empty()) {
    out += '-';
  } else {
    append_visible(out, e.limit);
  }
  if (!e.consumer_tier.empty()) {  // only when the policy has tiers
    out += " consumer_tier=";
    append_visible(out, e.consumer_tier);
  }
  if (!e.step.empty()) {  // only for a client on the penalty ladder
    out += " step=";
    out += e.step;
  }
  out += " upstream=";
  if (e.upstream.empty()) {
    out += '-';
  } else {
    append_visible(out, e.upstream);
  }
  out += " upstream_time=";
  if (e.upstream_seconds < 0) {
    out += '-';
  } else {
    append_seconds(out, e.upstream_seconds);
  }
  out += " bytes=";
  core::append_decimal(out, static_cast<std::int64_t>(e.bytes));
  out += ' ';
  append_seconds(out, e.seconds);
  out += "s\n";
}

void append_tunnel_line(std::string& out, bool json, std::chrono::system_clock::time_point now,
                        const tunnel_entry& e) {
  if (json) {
    json_start(out, now, "websocket_closed", e.client, e.method, e.target);
    json_text(out, "category", e.category);
    json_number(out, "code", e.code);
    json_text(out, "closed_by", e.by);
    json_number(out, "messages_from_client", e.from_client);
    json_number(out, "messages_from_upstream", e.from_upstream);
    json_seconds(out, "duration", e.seconds);
    out += "}\n";
    return;
  }
  text_start(out, now, e.client, e.method, e.target);
  out += "\" category=";
  append_visible(out, e.category);
  out += " websocket closed code=";
  core::append_decimal(out, e.code);
  out += " by=";
  out += e.by;
  out += " messages_from_client=";
  core::append_decimal(out, static_cast<std::int64_t>(e.from_client));
  out += " messages_from_upstream=";
  core::append_decimal(out, static_cast<std::int64_t>(e.from_upstream));
  out += ' ';
  append_seconds(out, e.seconds);
  out += "s\n";
}

}  // namespace tollgate::net
