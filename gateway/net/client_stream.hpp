#pragma once
/// The client side of a connection: the TCP socket, or TLS over it. The plain path stays
/// inline (no extra coroutine frame, writes tried at once); only TLS goes through the
/// functions of client_stream.cpp, the one place that sees OpenSSL's stream type.

#include <memory>
#include <span>
#include <utility>

#include "gateway/core/client_certificate.hpp"
#include "gateway/net/asio.hpp"

namespace boost::asio::ssl {
class context;
}

namespace tollgate::net {

/// Thread safety: used on its connection's worker only.
class client_stream {
 public:
  explicit client_stream(tcp_socket& s);
  ~client_stream();
  client_stream(const client_stream&) = delete;
  client_stream& operator=(const client_stream&) = delete;

  /// The socket underneath (closed by the watchdog, shut down at the end).
  tcp_socket& socket() noexcept { return socket_; }
  /// Whether TLS is on.
  bool tls() const noexcept { return tls_ != nullptr; }
  /// Whether the TLS handshake chose HTTP/2 by ALPN (docs/design.md §17).
  bool alpn_h2() const noexcept;

  /// Bytes handed to write_all() so far (before TLS): what the access log calls a response's
  /// bytes, as the difference across it.
  std::uint64_t written = 0;

  /// Performs the server side of a TLS handshake under `context`, starting with the bytes
  /// already read into `buffer` (what followed a PROXY header: often the ClientHello itself),
  /// which it consumes; afterwards every read and write is encrypted.
  task<error_code> handshake(asio::ssl::context& context, beast::flat_buffer& buffer);
  /// One read of decrypted bytes (TLS only); a signal on `wake` ends it with
  /// operation_aborted (nothing is lost: the TLS layer keeps what it had read).
  task<std::pair<error_code, std::size_t>> tls_read_some(asio::mutable_buffer b,
                                                         asio::cancellation_slot wake = {});
  /// Writes all of `pieces` encrypted (TLS only).
  task<error_code> tls_write(std::span<asio::const_buffer> pieces);

  /// The client's verified certificate (docs/design.md §17), read once after the handshake;
  /// null when none was asked for or presented.
  const core::client_certificate* certificate() const noexcept {
    return peer_ ? &peer_->facts : nullptr;
  }
  /// The header lines that forward certificate() upstream with every request of the
  /// connection (the listener's client_cert_headers), each ending in CRLF; "" without one.
  std::string_view certificate_fields() const noexcept {
    return peer_ ? std::string_view(peer_->fields) : std::string_view();
  }
  /// Sets certificate_fields() (once, after the handshake; nothing without a certificate).
  void set_certificate_fields(std::string lines) {
    if (peer_) peer_->fields = std::move(lines);
  }

 private:
  struct tls_state;
  /// What a verified client certificate gives the connection: allocated only for one.
  struct peer_certificate {
    core::client_certificate facts;  ///< its facts
    std::string fields;              ///< certificate_fields()
  };
  tcp_socket& socket_;
  std::unique_ptr<tls_state> tls_;          ///< set by a successful handshake
  std::unique_ptr<peer_certificate> peer_;  ///< set by a handshake that verified one
};

}  // namespace tollgate::net
