#pragma once
/// The upstream side of an exchange: the TCP socket, or TLS over it (docs/design.md §17). Like
/// client_stream, the plain path stays inline; only TLS goes through the functions of
/// upstream_stream.cpp, the one place that sees OpenSSL's stream type for upstreams.

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "gateway/net/asio.hpp"

namespace boost::asio::ssl {
class context;
}
struct ssl_session_st;  // OpenSSL's SSL_SESSION

namespace tollgate::net {

/// Frees an OpenSSL session (drops one reference).
struct tls_session_free {
  void operator()(ssl_session_st* s) const noexcept;
};
/// A TLS session an upstream handed out, kept to resume the next connection to it.
using tls_session = std::unique_ptr<ssl_session_st, tls_session_free>;

/// Who the upstream is to the TLS handshake.
struct tls_peer {
  std::string_view name;             ///< a DNS name (SNI and verified) or an IP literal (verified)
  ssl_session_st* resume = nullptr;  ///< a session to resume, or null
};

/// Thread safety: used on its connection's worker only.
class upstream_stream {
 public:
  explicit upstream_stream(tcp_socket& s);
  ~upstream_stream();
  upstream_stream(const upstream_stream&) = delete;
  upstream_stream& operator=(const upstream_stream&) = delete;

  /// The socket underneath (closed by the watchdog when a phase runs out).
  tcp_socket& socket() noexcept { return socket_; }
  /// Whether TLS is on.
  bool tls() const noexcept { return tls_ != nullptr; }

  /// Performs the client side of a TLS handshake under `context` with `peer` (SNI sent for a
  /// name, the certificate verified as the context says); afterwards every read and write is
  /// encrypted. On failure, `why` says why in words for the log (a verification's reason).
  task<error_code> handshake(asio::ssl::context& context, tls_peer peer, std::string& why);
  /// One read of decrypted bytes (TLS only); a signal on `wake` ends it with operation_aborted.
  task<std::pair<error_code, std::size_t>> tls_read_some(asio::mutable_buffer b,
                                                         asio::cancellation_slot wake = {});
  /// Writes all of `pieces` encrypted (TLS only).
  task<error_code> tls_write(std::span<asio::const_buffer> pieces);
  /// The session to resume the next connection with, or null (none resumable yet; TLS 1.3
  /// sends its tickets after the handshake).
  tls_session session() const;

 private:
  struct tls_state;
  tcp_socket& socket_;
  std::unique_ptr<tls_state> tls_;  ///< set by a successful handshake
};

}  // namespace tollgate::net
