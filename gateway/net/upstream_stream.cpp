#include "gateway/net/upstream_stream.hpp"

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/ssl.hpp>

namespace tollgate::net {

void tls_session_free::operator()(ssl_session_st* s) const noexcept {
  SSL_SESSION_free(s);
}

struct upstream_stream::tls_state {
  tls_state(tcp_socket& s, asio::ssl::context& c) : stream(s, c) {}
  asio::ssl::stream<tcp_socket&> stream;  ///< TLS over the connection's socket
};

upstream_stream::upstream_stream(tcp_socket& s) : socket_(s) {}
upstream_stream::~upstream_stream() = default;

/// Completes a read ahead: hands its result to the reader that took it, or keeps it (a
/// connection waiting in its pool is thereby known to have changed). Move-only, so that Asio
/// never destroys a copy while the read is pending. A read abandoned without completing (the
/// worker's io_context destroyed while it was pending) also lets go of its taker, the
/// coroutine that waits for it and owns the connection: nothing else would, and that
/// coroutine holds this state through its connection.
class upstream_stream::ahead_done {
 public:
  explicit ahead_done(std::shared_ptr<ahead_state> a) : a_(std::move(a)) {}
  ahead_done(ahead_done&&) noexcept = default;
  ahead_done(const ahead_done&) = delete;
  ahead_done& operator=(const ahead_done&) = delete;
  ~ahead_done() {
    if (a_ != nullptr && a_->taker) taker_type abandoned(std::move(a_->taker));
  }
  void operator()(error_code ec, std::size_t n) {
    const std::shared_ptr<ahead_state> a = std::move(a_);
    a->outstanding = false;
    if (a->taker) {
      taker_type taker(std::move(a->taker));
      std::move(taker)(ec, n);
    } else {
      a->done = true;
      a->ec = ec;
      a->n = n;
    }
  }

 private:
  std::shared_ptr<ahead_state> a_;
};

void upstream_stream::read_ahead(asio::mutable_buffer room) {
  BOOST_ASSERT(!tls() && !reading_ahead());
  if (ahead_ == nullptr) ahead_ = std::make_shared<ahead_state>();
  ahead_->outstanding = true;
  ahead_->done = false;
  ahead_->room = room.data();
  socket_.async_read_some(room, ahead_done(ahead_));
}

task<error_code> upstream_stream::handshake(asio::ssl::context& context, tls_peer peer,
                                            std::string& why) {
  auto state = std::make_unique<tls_state>(socket_, context);
  SSL* ssl = state->stream.native_handle();
  const std::string name(peer.name);
  error_code ec;
  const auto ip = asio::ip::make_address(name, ec);
  if (ec) {
    // A name: sent as SNI, and the certificate must hold it.
    SSL_set_tlsext_host_name(ssl, name.c_str());
    SSL_set1_host(ssl, name.c_str());
  } else {
    // An address literal is never sent as SNI (RFC 6066 §3); the certificate must hold it.
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), ip.to_string().c_str());
  }
  if (peer.resume != nullptr) SSL_set_session(ssl, peer.resume);
  std::tie(ec) = co_await state->stream.async_handshake(asio::ssl::stream_base::client, use_tuple);
  if (ec) {
    const long verified = SSL_get_verify_result(ssl);
    why = verified != X509_V_OK
              ? std::string("certificate verify failed: ") + X509_verify_cert_error_string(verified)
              : ec.message();
    co_return ec;
  }
  tls_ = std::move(state);
  co_return ec;
}

task<std::pair<error_code, std::size_t>> upstream_stream::tls_read_some(
    asio::mutable_buffer b, asio::cancellation_slot wake) {
  auto [ec, n] = co_await tls_->stream.async_read_some(b, use_tuple_cancellable(wake));
  // An upstream that closes without close_notify ends the stream like a plain EOF would: a
  // response delimited by the close is complete.
  if (ec == asio::ssl::error::stream_truncated) ec = asio::error::eof;
  co_return std::pair{ec, n};
}

task<error_code> upstream_stream::tls_write(std::span<asio::const_buffer> pieces) {
  auto [ec, n] = co_await asio::async_write(tls_->stream, pieces, use_tuple);
  co_return ec;
}

tls_session upstream_stream::session() const {
  if (!tls_) return nullptr;
  const SSL_SESSION* s = SSL_get0_session(tls_->stream.native_handle());
  if (s == nullptr || SSL_SESSION_is_resumable(s) != 1) return nullptr;
  // A copy: OpenSSL marks a connection's own session unresumable when the connection is freed
  // without a close_notify sent, which is how HTTP connections usually end (upstreams close
  // idle ones; the gateway closes those it does not keep).
  return tls_session(SSL_SESSION_dup(s));
}

}  // namespace tollgate::net
