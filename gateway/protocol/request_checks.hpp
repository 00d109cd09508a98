#pragma once
/// Checks of a request head that RFC 9112 asks a server to make before it trusts the framing
/// and the target: what Beast's parser lets through. Pure functions of the head's text.

#include <string_view>

namespace tollgate::protocol {

/// Whether `value` is a valid Host field value (RFC 9110 §7.2, RFC 3986 §3.2.2):
/// `uri-host [ ":" port ]`, the host a reg-name (unreserved, percent-encoded, sub-delims), a
/// dotted IPv4 address or a bracketed IP literal; empty is allowed (a target without an
/// authority). Spaces, `/`, `@`, `?`, `#`, control characters and anything past a port are not.
bool valid_host(std::string_view value) noexcept;

/// Whether a request's Transfer-Encoding is acceptable (RFC 9112 §6.3): absent, or ending in
/// `chunked`, which the parser then reads. Anything else (`gzip`, `chunked, identity`,
/// `xchunked`) leaves the body's length unknowable, so the request is refused.
constexpr bool acceptable_transfer_encoding(bool has_transfer_encoding, bool chunked) noexcept {
  return !has_transfer_encoding || chunked;
}

}  // namespace tollgate::protocol
