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

  // The read ahead of a plain connection in its pool (upstream_pool). As the connection goes
  // back to the pool a read is started and left pending: while the connection waits, its
  // completion means the connection is no longer as it was left (bytes nobody asked for, or
  // its end: nginx watches idle upstream connections the same way, by their read events), and
  // once the connection is taken again the same read brings the response. One non-blocking
  // read as the connection goes back, where a check before reuse (a peek) and a first read
  // that finds nothing yet cost two system calls per exchange.

  /// Starts the read ahead into `room` (the free room of the connection's empty buffer, which
  /// must stay where it is until the read is taken). Plain connections only.
  void read_ahead(asio::mutable_buffer room);
  /// Whether a read ahead is pending and nothing has come: the connection is as it was left.
  bool ahead_untouched() const noexcept { return ahead_ != nullptr && ahead_->outstanding; }
  /// Whether a read ahead awaits its taker (pending, or completed and not yet taken).
  bool reading_ahead() const noexcept {
    return ahead_ != nullptr && !ahead_->taker && (ahead_->outstanding || ahead_->done);
  }
  /// Takes the read ahead as the next read: completes with what it read into the room it was
  /// given, which is `room` (checked), at once if it has completed already.
  template <class Token>
  auto async_take_ahead(asio::mutable_buffer room, Token&& token) {
    BOOST_ASSERT(reading_ahead() && room.data() == ahead_->room);
    (void)room;
    return asio::async_initiate<Token, void(error_code, std::size_t)>(
        [](auto handler, ahead_state* a, const executor& ex) {
          if (a->done) {
            a->done = false;
            asio::post(ex, asio::append(std::move(handler), a->ec, a->n));
          } else {
            // Not assigned: Boost 1.81's move assignment of any_completion_handler recurses
            // without end (it copies through its converting constructor).
            taker_type(std::move(handler)).swap(a->taker);
          }
        },
        token, ahead_.get(), socket_.get_executor());
  }

 private:
  struct tls_state;
  using taker_type = asio::any_completion_handler<void(error_code, std::size_t)>;
  /// A read ahead's state, shared with its completion handler (the connection may be gone
  /// when the read completes).
  struct ahead_state {
    bool outstanding = false;    ///< the read is pending (its handler has not run)
    bool done = false;           ///< it completed with nobody waiting: ec and n hold the result
    const void* room = nullptr;  ///< where it reads to
    error_code ec;               ///< see done
    std::size_t n = 0;           ///< see done
    taker_type taker;            ///< the reader waiting for it, if one took it
  };
  /// The read's completion handler.
  class ahead_done;
  tcp_socket& socket_;
  std::unique_ptr<tls_state> tls_;      ///< set by a successful handshake
  std::shared_ptr<ahead_state> ahead_;  ///< made at the connection's first read ahead
};

}  // namespace tollgate::net
