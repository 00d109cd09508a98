#pragma once
/// HTTP/2 to clients (docs/design.md §17): how a connection is recognised as HTTP/2, and the
/// session that serves it. Internal to net/.

#include <memory>
#include <string_view>

#include "gateway/net/scratch.hpp"
#include "gateway/net/worker.hpp"

namespace tollgate::net {

/// The client connection preface of HTTP/2 (RFC 9113 §3.4).
inline constexpr std::string_view h2_preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// What the first bytes of a plain connection say about HTTP/2 with prior knowledge.
enum class preface_match {
  no,       ///< not the preface: HTTP/1.1
  partial,  ///< the preface so far: more bytes are needed to tell
  yes       ///< the whole preface
};

/// Whether `bytes`, the first of a connection, begin with the preface.
inline preface_match match_preface(std::string_view bytes) noexcept {
  const std::size_t n = bytes.size() < h2_preface.size() ? bytes.size() : h2_preface.size();
  if (bytes.substr(0, n) != h2_preface.substr(0, n)) return preface_match::no;
  return n == h2_preface.size() ? preface_match::yes : preface_match::partial;
}

/// Serves one HTTP/2 connection until it ends: every stream a request that takes admission's
/// path (net/admit.hpp) and is answered by the gateway or forwarded to the HTTP/1.1 upstream
/// pool. The bytes already read (after a PROXY header or the TLS handshake; the preface
/// included) are in `sc`'s buffer, which goes back to the worker at once.
task<void> serve_h2(worker& w, deadline_watch& watch, std::unique_ptr<connection_scratch>& sc,
                    const core::address& peer, const listener_info& l);

}  // namespace tollgate::net
