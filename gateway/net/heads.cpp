#include "gateway/net/heads.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>

#include "gateway/core/text.hpp"
#include "gateway/policy/browser.hpp"
#include "gateway/policy/cors.hpp"
#include "gateway/protocol/request_checks.hpp"

namespace tollgate::net {

namespace {

/// "name: value\r\n", grown once and copied in, rather than four appends that each check
/// the capacity (heads are a dozen lines; this is most of rendering them).
void append_line(std::string& out, std::string_view name, std::string_view value) {
  const std::size_t at = out.size();
  out.resize(at + name.size() + value.size() + 4);
  char* p = out.data() + at;
  std::memcpy(p, name.data(), name.size());
  p += name.size();
  *p++ = ':';
  *p++ = ' ';
  std::memcpy(p, value.data(), value.size());
  p += value.size();
  *p++ = '\r';
  *p = '\n';
}

/// Appends a request's Cookie line `value` without the gateway's proof-of-work cookie, which
/// the gateway spends (docs/design.md §5 "Browsers"): the line goes when it held nothing else.
void append_cookie(std::string& out, std::string_view value) {
  const bool pow = value.find(policy::pow_cookie) != std::string_view::npos;
  const bool clearance = value.find(policy::clearance_cookie) != std::string_view::npos;
  if (!pow && !clearance) {
    append_line(out, "Cookie", value);
    return;
  }
  // Only for a request that carries one of them: its proof, or its clearance (docs/design.md
  // §16), neither of them the upstream's.
  std::string rest, other;
  if (pow) {
    policy::strip_cookie(value, policy::pow_cookie, rest);
    value = rest;
  }
  if (clearance) {
    policy::strip_cookie(value, policy::clearance_cookie, other);
    value = other;
  }
  if (!value.empty()) append_line(out, "Cookie", value);
}

/// Appends the end-to-end fields of `f`: not hop-by-hop, not named by Connection, not framing
/// (the gateway sets that), and not one the gateway sets itself (`ours`); a request's Cookie
/// lines (`request`) without the proof-of-work cookie.
template <class Ours>
void append_end_to_end(std::string& out, const fields& f, Ours ours, bool request = false) {
  // Connection's tokens from all its field lines: one list (RFC 9110 §5.3).
  std::array<std::string_view, 16> listed;
  std::size_t n_listed = 0;
  const auto [first, last] = f.equal_range(http::field::connection);
  for (auto line = first; line != last; ++line) {
    for (const auto& token : http::token_list(line->value())) {
      if (n_listed < listed.size()) listed[n_listed++] = sv(token);
    }
  }
  for (const auto& field : f) {
    switch (field.name()) {
      case http::field::connection:
      case http::field::keep_alive:
      case http::field::proxy_connection:
      case http::field::te:
      case http::field::trailer:
      case http::field::transfer_encoding:
      case http::field::upgrade:
      case http::field::content_length:
        continue;
      default:
        break;
    }
    const std::string_view name = sv(field.name_string());
    // "Connection: host" must not drop the Host a request needs.
    if (field.name() != http::field::host) {
      bool hop = false;
      for (std::size_t i = 0; i < n_listed && !hop; ++i)
        hop = core::iequals(listed[i], name);
      if (hop) continue;
    }
    if (request && field.name() == http::field::cookie) {
      append_cookie(out, sv(field.value()));
      continue;
    }
    if (ours(name)) continue;
    append_line(out, name, sv(field.value()));
  }
}

/// Request fields the gateway sets or consumes: the forwarding ones, Expect (answered here),
/// the proof of work (spent here) and clearance (judged here), and the shadow announcement (a
/// client's would be a lie).
bool is_forwarding_field(std::string_view name) noexcept {
  return core::iequals(name, "x-forwarded-for") || core::iequals(name, "x-forwarded-proto") ||
         core::iequals(name, "x-real-ip") || core::iequals(name, "expect") ||
         core::iequals(name, policy::pow_solution_field) ||
         core::iequals(name, policy::clearance_field) || core::iequals(name, shadow_field);
}

/// The fields of docs/design.md §4 that the gateway sets on every checked response, in the order it
/// writes them; an upstream's own are dropped so that the client sees one value of each.
constexpr std::array<std::string_view, 6> rate_limit_field_names = {
    "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset",
    "X-RateLimit-Level", "RateLimit-Policy",      "RateLimit"};

bool is_rate_limit_field(std::string_view name) noexcept {
  return std::any_of(rate_limit_field_names.begin(), rate_limit_field_names.end(),
                     [&](std::string_view n) { return core::iequals(name, n); });
}

/// A Content-Length as it was received: all 64 bits of it (a signed conversion would write
/// a length past 2^63 as a negative number, which no client parses; found by fuzz_http_heads).
void append_length(std::string& out, std::uint64_t length) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, length);
  out.append(buf, r.ptr);
}

}  // namespace

void append_rate_limit_fields(std::string& out, const policy::rate_limit_fields& fields) {
  if (!fields.present) return;
  const std::array<std::string_view, 6> values = {fields.limit, fields.remaining, fields.reset,
                                                  fields.level, fields.policy,    fields.ratelimit};
  for (std::size_t i = 0; i < values.size(); ++i)
    append_line(out, rate_limit_field_names[i], values[i]);
  if (!fields.retry_after.empty()) {
    append_line(out, "Retry-After", fields.retry_after);
    append_line(out, "X-RateLimit-Reason", fields.reason);
  }
}

std::string certificate_lines(const config::certificate_headers& names,
                              const core::client_certificate& c) {
  std::string out;
  // A fact the certificate lacks (no subjectAltName) has no line.
  if (!names.subject.empty() && !c.subject.empty()) append_line(out, names.subject, c.subject);
  if (!names.san.empty() && !c.san.empty()) append_line(out, names.san, c.san);
  if (!names.sha256.empty() && !c.sha256.empty()) append_line(out, names.sha256, c.sha256);
  return out;
}

bool has_token(const fields& f, http::field name, std::string_view token) {
  const auto [first, last] = f.equal_range(name);
  for (auto line = first; line != last; ++line) {
    for (const auto& t : http::token_list(line->value())) {
      if (core::iequals(sv(t), token)) return true;
    }
  }
  return false;
}

void render_upstream_head(std::string& out, const request_parser& parser,
                          const upstream_fields& added) {
  const auto& req = parser.get();
  out.clear();
  out += sv(req.method_string());
  out += ' ';
  out += sv(req.target());
  out += " HTTP/1.1\r\n";
  if (!added.host.empty()) append_line(out, "Host", added.host);
  if (added.certificate_names.empty()) {
    append_end_to_end(out, req.base(), is_forwarding_field, true);
  } else {
    // A client's own copy of a field the gateway forwards certificates in is a forgery.
    append_end_to_end(
        out, req.base(),
        [names = added.certificate_names](std::string_view name) {
          return is_forwarding_field(name) ||
                 std::any_of(names.begin(), names.end(),
                             [&](const std::string& n) { return core::iequals(n, name); });
        },
        true);
  }
  out += added.certificate;
  append_line(out, "X-Forwarded-For", added.forwarded_for);
  append_line(out, "X-Forwarded-Proto", added.proto);
  append_line(out, "X-Real-IP", added.real_ip);
  if (!added.shadow.empty()) append_line(out, shadow_field, added.shadow);
  if (added.upgrade) out += "Connection: Upgrade\r\nUpgrade: websocket\r\n";
  if (parser.chunked()) {
    out += "Transfer-Encoding: chunked\r\n";
  } else if (const auto length = parser.content_length()) {
    out += "Content-Length: ";
    append_length(out, *length);
    out += "\r\n";
  }
  out += "\r\n";
}

void render_upstream_head(std::string& out, const h2_request_head& req,
                          const upstream_fields& added) {
  out.clear();
  out += req.method;
  out += ' ';
  out += req.target;
  out += " HTTP/1.1\r\n";
  append_line(out, "Host", req.host);
  for (const auto& field : req.fields) {
    // Named copies, not a structured binding: clang 14 cannot capture one in a lambda.
    const std::string_view name = field.first;
    const std::string_view value = field.second;
    if (name == "host" || name == "te" || name == "content-length" || name == "transfer-encoding" ||
        name == "connection" || is_forwarding_field(name)) {
      continue;
    }
    // A client's own copy of a field the gateway forwards certificates in is a forgery.
    if (std::any_of(added.certificate_names.begin(), added.certificate_names.end(),
                    [&](const std::string& n) { return core::iequals(n, name); })) {
      continue;
    }
    if (name == "cookie") {
      append_cookie(out, value);
      continue;
    }
    append_line(out, name, value);
  }
  out += added.certificate;
  append_line(out, "X-Forwarded-For", added.forwarded_for);
  append_line(out, "X-Forwarded-Proto", added.proto);
  append_line(out, "X-Real-IP", added.real_ip);
  if (!added.shadow.empty()) append_line(out, shadow_field, added.shadow);
  if (req.content_length) {
    out += "Content-Length: ";
    append_length(out, *req.content_length);
    out += "\r\n";
  } else if (req.chunked) {
    out += "Transfer-Encoding: chunked\r\n";
  } else if (req.empty_body) {
    out += "Content-Length: 0\r\n";
  }
  out += "\r\n";
}

client_framing render_client_head(std::string& out, const response_parser& parser,
                                  const client_head& how) {
  // Named copies, not a structured binding: clang 14 cannot capture one in a lambda.
  const unsigned version = how.version;
  const bool keep_alive = how.keep_alive;
  const bool head_request = how.head_request;
  const bool own_cors = how.own_cors;
  const std::string_view extra = how.extra;
  const policy::rate_limit_fields& fields = *how.fields;
  const auto& res = parser.get();
  const unsigned status = res.result_int();
  out.clear();
  out += version < 11 ? "HTTP/1.0 " : "HTTP/1.1 ";
  core::append_decimal(out, status);
  out += ' ';
  const std::string_view reason = sv(res.reason());
  out += reason.empty() ? sv(http::obsolete_reason(res.result())) : reason;
  out += "\r\n";
  append_end_to_end(out, res.base(), [&](std::string_view name) {
    return (fields.present && is_rate_limit_field(name)) || core::iequals(name, violation_field) ||
           core::iequals(name, tier_field) || (own_cors && policy::is_cors_field(name));
  });
  append_rate_limit_fields(out, fields);
  out += extra;

  client_framing framing{keep_alive, false};
  const bool bodiless = status < 200 || status == 204 || status == 304;
  if (head_request || bodiless) {
    // No body follows; a HEAD answer keeps the length the GET would have had.
    if (const auto length = parser.content_length(); length && head_request) {
      out += "Content-Length: ";
      append_length(out, *length);
      out += "\r\n";
    }
  } else if (const auto length = parser.content_length(); length && !parser.chunked()) {
    out += "Content-Length: ";
    append_length(out, *length);
    out += "\r\n";
  } else if (version >= 11) {
    framing.chunked = true;  // length unknown: chunked for HTTP/1.1
    out += "Transfer-Encoding: chunked\r\n";
  } else {
    framing.keep_alive = false;  // HTTP/1.0: the end of the connection ends the body
  }
  if (version >= 11 && !framing.keep_alive) out += "Connection: close\r\n";
  if (version < 11 && framing.keep_alive) out += "Connection: keep-alive\r\n";
  out += "\r\n";
  return framing;
}

void render_switching_head(std::string& out, const response_parser& parser,
                           const policy::rate_limit_fields& fields, std::string_view extra) {
  out.clear();
  out += "HTTP/1.1 101 Switching Protocols\r\n";
  append_end_to_end(out, parser.get().base(), [&](std::string_view name) {
    return (fields.present && is_rate_limit_field(name)) || core::iequals(name, violation_field) ||
           core::iequals(name, tier_field);
  });
  append_rate_limit_fields(out, fields);
  out += extra;
  out += "Upgrade: websocket\r\nConnection: Upgrade\r\n\r\n";
}

/// Feeds the bytes already buffered to `parser`, which is reading a request head, counting
/// them in `head`. Returns whether the head is complete; an error (the limit among them) goes
/// to `ec`. The head may be `limit` bytes at most: exactly, where Beast's own check counts
/// only the fields and lets the request line come on top.
bool parse_head_buffered(request_parser& parser, beast::flat_buffer& buffer, std::uint64_t& head,
                         std::uint64_t limit, error_code& ec) {
  const std::size_t before = buffer.size();
  parse_buffered(parser, buffer, ec);
  head += before - buffer.size();
  if (ec) return false;
  if (parser.is_header_done()) {
    if (head > limit) ec = http::error::header_limit;
    return !ec;
  }
  // The head is not complete, so every byte still buffered belongs to it.
  if (head + buffer.size() > limit) ec = http::error::header_limit;
  return false;
}

/// Why a parsed head cannot be served (RFC 9112 §3.2, §6.3), or "" when it can; says whether
/// it has a Host (an HTTP/1.0 request may not). Refused heads get 400 and the connection
/// closes: their framing or their target cannot be trusted.
std::string_view head_fault(const request_parser& parser, bool& has_host) {
  const auto& req = parser.get();
  // One pass over the fields by their known names (integers): a lookup by name would compare
  // strings down the fields' tree, twice.
  bool transfer_encoding = false;
  std::size_t hosts = 0;
  std::string_view host;
  for (const auto& f : req) {
    if (f.name() == http::field::host) {
      ++hosts;
      host = sv(f.value());
    } else if (f.name() == http::field::transfer_encoding) {
      transfer_encoding = true;
    }
  }
  if (!protocol::acceptable_transfer_encoding(transfer_encoding, parser.chunked())) {
    return "Transfer-Encoding must end in chunked";
  }
  has_host = hosts > 0;
  if (hosts == 0) return req.version() >= 11 ? "HTTP/1.1 request without Host" : "";
  if (hosts > 1) return "more than one Host field";
  if (!protocol::valid_host(host)) return "invalid Host";
  return "";
}

}  // namespace tollgate::net
