#include "gateway/net/client_stream.hpp"

#include <boost/asio/ssl.hpp>

namespace tollgate::net {

struct client_stream::tls_state {
  tls_state(tcp_socket& s, asio::ssl::context& c) : stream(s, c) {}
  asio::ssl::stream<tcp_socket&> stream;  ///< TLS over the connection's socket
};

client_stream::client_stream(tcp_socket& s) : socket_(s) {}
client_stream::~client_stream() = default;

task<error_code> client_stream::handshake(asio::ssl::context& context, beast::flat_buffer& buffer) {
  auto state = std::make_unique<tls_state>(socket_, context);
  auto [ec, used] = co_await state->stream.async_handshake(asio::ssl::stream_base::server,
                                                           buffer.data(), use_tuple);
  buffer.consume(used);
  if (!ec) tls_ = std::move(state);
  co_return ec;
}

bool client_stream::alpn_h2() const noexcept {
  if (!tls_) return false;
  const unsigned char* p = nullptr;
  unsigned int n = 0;
  SSL_get0_alpn_selected(tls_->stream.native_handle(), &p, &n);
  return n == 2 && p[0] == 'h' && p[1] == '2';
}

task<std::pair<error_code, std::size_t>> client_stream::tls_read_some(
    asio::mutable_buffer b, asio::cancellation_slot wake) {
  auto [ec, n] = co_await tls_->stream.async_read_some(b, use_tuple_cancellable(wake));
  // A peer that closes without close_notify ends the stream like a plain EOF would.
  if (ec == asio::ssl::error::stream_truncated) ec = asio::error::eof;
  co_return std::pair{ec, n};
}

task<error_code> client_stream::tls_write(std::span<asio::const_buffer> pieces) {
  auto [ec, n] = co_await asio::async_write(tls_->stream, pieces, use_tuple);
  co_return ec;
}

}  // namespace tollgate::net
