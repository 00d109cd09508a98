#pragma once
/// Message heads as the gateway sends them, rendered straight into a per-connection buffer:
/// end-to-end fields copied as received, hop-by-hop ones (RFC 9110 §7.6.1) left out, the
/// gateway's own fields and the framing added. No field is allocated and no serializer walks
/// a buffer sequence. Internal to net/.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "gateway/config/gateway.hpp"
#include "gateway/core/client_certificate.hpp"
#include "gateway/net/messages.hpp"
#include "gateway/policy/verdict.hpp"

namespace tollgate::net {

/// Reported by an upstream, recorded as a violation, never shown to the client (docs/design.md §5).
inline constexpr std::string_view violation_field = "X-Tollgate-Violation";
/// The field in which an upstream sets its client's consumer tier (docs/design.md §15); like
/// violation_field, never relayed to the client.
inline constexpr std::string_view tier_field = "X-Tollgate-Tier";
/// Told to the upstream: the shadowed limit that would have rejected the request (docs/design.md
/// §12).
inline constexpr std::string_view shadow_field = "X-Tollgate-Shadow";

/// Appends the rate-limit header lines of docs/design.md §4 (nothing when the request carried no
/// limits; Retry-After and X-RateLimit-Reason only for a rejection).
void append_rate_limit_fields(std::string& out, const policy::rate_limit_fields& fields);

/// Whether field `name` of `f` lists `token` (case-insensitive), its tokens taken from every
/// line of the field: one list (RFC 9110 §5.3).
bool has_token(const fields& f, http::field name, std::string_view token);

/// What the gateway adds to a request head it sends upstream.
struct upstream_fields {
  std::string_view forwarded_for;  ///< X-Forwarded-For
  std::string_view proto;          ///< X-Forwarded-Proto
  std::string_view real_ip;        ///< X-Real-IP
  std::string_view host;           ///< Host, when the request has none (HTTP/1.0); else ""
  std::string_view shadow;         ///< X-Tollgate-Shadow (docs/design.md §12), or ""
  bool upgrade = false;            ///< a WebSocket upgrade: Upgrade and Connection kept
  /// The client certificate's lines (docs/design.md §17), each ending in CRLF, or "".
  std::string_view certificate;
  /// Every field the gateway forwards certificates in: a client's own copies are dropped.
  std::span<const std::string> certificate_names;
};

/// The lines that forward the facts of `c` in the fields `names` gives (docs/design.md §17),
/// each ending in CRLF: one per field named.
std::string certificate_lines(const config::certificate_headers& names,
                              const core::client_certificate& c);

/// Renders the head of `req` for the upstream into `out`, with the forwarding headers of
/// docs/design.md §7 and framing from `parser` (chunked stays chunked, a length stays a length).
/// The proof-of-work cookie (docs/design.md §5) is taken out of its Cookie lines.
void render_upstream_head(std::string& out, const request_parser& parser,
                          const upstream_fields& added);

/// An HTTP/2 request's head as the upstream gets it over HTTP/1.1.
struct h2_request_head {
  std::string_view method;  ///< :method
  std::string_view target;  ///< :path
  std::string_view host;    ///< :authority, else its Host
  /// Its regular fields (names in lowercase, cookies joined), Host among them or not.
  std::span<const std::pair<std::string_view, std::string_view>> fields;
  std::optional<std::uint64_t> content_length;  ///< the body's length, when announced
  bool chunked = false;     ///< a body of unannounced length follows: sent chunked
  bool empty_body = false;  ///< no body, and the method is one that usually has one
};

/// Renders the head of HTTP/2 request `req` for the upstream into `out`, as
/// render_upstream_head does an HTTP/1.1 one: Host from :authority, end-to-end fields copied
/// (HTTP/2 has no hop-by-hop ones but TE), the forwarding fields added, the proof-of-work and
/// clearance cookies taken out.
void render_upstream_head(std::string& out, const h2_request_head& req,
                          const upstream_fields& added);

/// How a response body goes to the client.
struct client_framing {
  bool keep_alive;  ///< the client connection stays open afterwards
  bool chunked;     ///< the body is sent chunked
};

/// How an upstream's response head goes to the client.
struct client_head {
  unsigned version = 11;                              ///< the client speaks HTTP/1.`version % 10`
  bool keep_alive = false;                            ///< the client connection may stay open
  bool head_request = false;                          ///< the request was HEAD: no body follows
  const policy::rate_limit_fields* fields = nullptr;  ///< the rate-limit fields (docs/design.md §4)
  std::string_view extra;  ///< the gateway's own lines, each ending in CRLF
  bool own_cors = false;   ///< the gateway owns CORS: the upstream's Access-Control-* go
};

/// Renders the upstream response head of `parser` for the client into `out`, as `how` says.
client_framing render_client_head(std::string& out, const response_parser& parser,
                                  const client_head& how);

/// Renders the 101 of an upstream that accepted a WebSocket upgrade for the client into `out`:
/// its end-to-end fields (Sec-WebSocket-Accept, -Protocol, -Extensions among them), the
/// rate-limit fields of `fields`, the lines `extra`, and the Upgrade and Connection of this one
/// response.
void render_switching_head(std::string& out, const response_parser& parser,
                           const policy::rate_limit_fields& fields, std::string_view extra);

/// Feeds the bytes already buffered to `parser`, which is reading a request head, counting
/// them in `head`. Returns whether the head is complete; an error (the limit among them) goes
/// to `ec`. The head may be `limit` bytes at most: exactly, however the bytes arrive, where
/// Beast's own check counts only the fields and lets the request line come on top.
bool parse_head_buffered(request_parser& parser, beast::flat_buffer& buffer, std::uint64_t& head,
                         std::uint64_t limit, error_code& ec);

/// Why a parsed request head cannot be served (RFC 9112 §3.2, §6.3), or "" when it can; says
/// whether it has a Host (an HTTP/1.0 request may not). Refused heads get 400 and the
/// connection closes: their framing or their target cannot be trusted.
std::string_view head_fault(const request_parser& parser, bool& has_host);

}  // namespace tollgate::net
