#pragma once
/// The PROXY protocol header (HAProxy's proxy-protocol.txt, versions 1 and 2) that a load
/// balancer in front of a listener sends before the client's bytes, naming the client's
/// address. Pure parsing, no I/O.

#include <cstddef>
#include <optional>
#include <string_view>

#include "gateway/core/address.hpp"

namespace tollgate::protocol {

/// Outcome of looking at the first bytes of a connection.
enum class proxy_parse {
  need_more,  ///< a valid prefix so far; read more
  done,       ///< a whole header: `length` bytes, `source` set unless LOCAL/UNKNOWN
  invalid,    ///< not a PROXY header, or a malformed one: drop the connection
};

/// What a complete header said.
struct proxy_header {
  std::size_t length = 0;               ///< bytes of the header, to be skipped
  std::optional<core::address> source;  ///< the client; empty for LOCAL / UNKNOWN (use the peer)
};

/// The longest header accepted: a v1 line is at most 107 bytes; v2 headers with TLVs longer
/// than this are refused.
inline constexpr std::size_t max_proxy_header = 1024;

/// Parses the start of a connection's bytes.
proxy_parse parse_proxy_header(std::string_view data, proxy_header& out);

}  // namespace tollgate::protocol
