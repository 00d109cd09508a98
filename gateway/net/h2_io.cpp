// The reader and the writer of an HTTP/2 connection (docs/design.md §17), the coroutines of
// h2_connection; nghttp2's callbacks are in h2_connection.cpp, which has none (the fuzz build
// instruments it whole: tests/fuzz/fuzz_h2_frames.cpp).

#include <array>

#include "gateway/net/h2.hpp"
#include "gateway/net/h2_connection.hpp"
#include "gateway/net/stream_io.hpp"

namespace tollgate::net {

namespace {

/// Bytes of a connection's output gathered into one write.
constexpr std::size_t write_gather = 64 * 1024;

}  // namespace

void spawn_stream(std::shared_ptr<h2_connection> c, h2_stream& s) {
  asio::io_context& io = c->w.io;  // named first: `c` is moved in the same call
  asio::co_spawn(io, run_stream(std::move(c), s), asio::detached);
}

void h2_connection::gather() {
  out_.clear();
  out_at_ = 0;
  while (out_.size() < write_gather) {
    const std::uint8_t* data = nullptr;
    const ssize_t n = nghttp2_session_mem_send(session_, &data);
    if (n <= 0) break;
    out_.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
  }
}

void h2_connection::send_soon() {
  // A connection serving one stream sends its frames at once: nothing else would join the
  // write, and the writer's wake-up would cost a trip through the scheduler (and the stream's
  // wait for its response to be taken another). Not from within nghttp2's callbacks, which must
  // not send; not over TLS, whose writes are the writer's; not while the writer writes.
  if (streams_.size() != 1 || receiving_ || writing_ || writer_done_ || out_at_ != out_.size() ||
      watch.stream.tls()) {
    wake_writer();
    return;
  }
  gather();
  if (!out_.empty()) {
    asio::const_buffer piece = asio::buffer(out_);
    std::span<asio::const_buffer> rest(&piece, 1);
    if (write_now(watch.client, rest)) {
      watch.close_client();  // the client is gone: the reader sees the end
      return;
    }
    // What the socket did not take, the writer writes when it can.
    if (rest.empty()) {
      out_.clear();
    } else {
      out_at_ = out_.size() - rest.front().size();
    }
  }
  wake_writer();  // for the rest, if any, or for the end of the connection
}

task<void> h2_connection::writer([[maybe_unused]] std::shared_ptr<h2_connection> self) {
  struct done {
    h2_connection& c;
    ~done() {
      c.writer_done_ = true;
      c.ended_.cancel();
    }
  } const ending{*this};
  for (;;) {
    wake_pending_ = false;
    // What send_soon could not write at once goes first.
    if (out_at_ == out_.size()) gather();
    if (out_at_ < out_.size()) {
      writing_ = true;
      watch.client_for(w.current->config.limits.body_timeout);
      asio::const_buffer piece = asio::buffer(out_.data() + out_at_, out_.size() - out_at_);
      const error_code ec = co_await write_all(watch.stream, std::span(&piece, 1));
      writing_ = false;
      out_.clear();
      out_at_ = 0;
      if (ec) co_return;  // the reader sees the socket's end too
      arm();
      continue;
    }
    if (reading_done_) co_return;
    if (nghttp2_session_want_read(session_) == 0 && nghttp2_session_want_write(session_) == 0) {
      // All said (a GOAWAY among it): the client reads the end of the stream.
      error_code ignored;
      watch.client.shutdown(tcp::socket::shutdown_send, ignored);
      goaway_due_ = true;
      arm();
      co_return;
    }
    if (wake_pending_) continue;
    co_await wake_.async_wait(use_tuple);
  }
}

task<void> h2_connection::run(std::string initial) {
  auto self = shared_from_this();
  w.counters.h2_connections[l.metric].add();
  watch.on_due = &h2_connection::due;
  watch.due_context = this;
  w.tunnels.push(*this);  // told when the gateway drains
  struct unhook {
    h2_connection& c;
    ~unhook() {
      c.watch.on_due = nullptr;
      c.w.tunnels.erase(c);
    }
  } const unhooking{*this};
  asio::co_spawn(w.io, writer(self), asio::detached);
  auto feed = [&](const char* data, std::size_t n) {
    receiving_ = true;
    const ssize_t rv =
        nghttp2_session_mem_recv(session_, reinterpret_cast<const std::uint8_t*>(data), n);
    receiving_ = false;
    if (rv < 0) {
      calm(rv == NGHTTP2_ERR_FLOODED                  ? h2_abuse::flood
           : rv == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS ? h2_abuse::header_block
                                                      : h2_abuse::protocol);
      return false;
    }
    wake_writer();
    return !goaway_due_;
  };
  arm();
  bool open = feed(initial.data(), initial.size());
  initial = std::string();
  // A TLS connection reads through the TLS layer into a buffer of its own; a plain one waits
  // for the socket to be readable and reads into its worker's buffer, so that a waiting
  // connection holds none.
  std::unique_ptr<std::array<char, 16 * 1024>> tls_buffer;
  bool peer_open = true;  // the client's side has not ended
  while (open) {
    arm();
    error_code ec;
    std::size_t n = 0;
    const char* data = nullptr;
    if (watch.stream.tls()) {
      if (!tls_buffer) tls_buffer = std::make_unique<std::array<char, 16 * 1024>>();
      std::tie(ec, n) = co_await watch.stream.tls_read_some(asio::buffer(*tls_buffer));
      data = tls_buffer->data();
    } else {
      std::tie(ec) = co_await watch.client.async_wait(tcp_socket::wait_read, use_tuple);
      if (!ec) {
        auto& buffer = w.relay_buffer();
        n = watch.client.read_some(asio::buffer(buffer), ec);
        data = buffer.data();
        if (ec == asio::error::would_block || ec == asio::error::try_again) continue;
      }
    }
    if (ec) {  // the client closed, reset, or the watchdog closed it
      peer_open = false;
      break;
    }
    open = feed(data, n);
    if (nghttp2_session_want_read(session_) == 0) break;
  }
  reading_done_ = true;
  // Nothing more comes from the client: what was queued (a GOAWAY) goes out while streams end.
  // Every stream still served ends now; its upstream's work stops.
  // A stream whose head never came whole has no coroutine to end it: it goes now.
  for (std::size_t i = streams_.size(); i-- > 0;) {
    if (!streams_[i]->head_done) {
      streams_[i]->closed = true;
      finished(*streams_[i]);
    }
  }
  for (auto& s : streams_) {
    s->closed = true;
    if (s->upstream != nullptr) {
      error_code ignored;
      s->upstream->close(ignored);
    }
    s->notify();
  }
  while (!streams_.empty() || !writer_done_) {
    wake_.cancel();
    ended_.expires_at(timer::time_point::max());
    if (streams_.empty() && writer_done_) break;
    co_await ended_.async_wait(use_tuple);
  }
  // Ended by the gateway (a GOAWAY) while the client may still be sending: what it sends is
  // read and dropped until it closes, or for a second (arm), so that its kernel does not
  // receive a reset that discards the GOAWAY unread (nginx's lingering close).
  while (peer_open && goaway_due_) {
    error_code ec;
    if (watch.stream.tls()) {
      if (!tls_buffer) tls_buffer = std::make_unique<std::array<char, 16 * 1024>>();
      std::size_t n = 0;
      std::tie(ec, n) = co_await watch.stream.tls_read_some(asio::buffer(*tls_buffer));
    } else {
      std::tie(ec) = co_await watch.client.async_wait(tcp_socket::wait_read, use_tuple);
      if (!ec) {
        watch.client.read_some(asio::buffer(w.relay_buffer()), ec);
        if (ec == asio::error::would_block || ec == asio::error::try_again) ec = {};
      }
    }
    if (ec) break;
  }
}

// --- the entry point ------------------------------------------------------------------------

task<void> serve_h2(worker& w, deadline_watch& watch, std::unique_ptr<connection_scratch>& sc,
                    const core::address& peer, const listener_info& l) {
  std::string initial(view_of(sc->buffer));
  sc->buffer.clear();
  w.scratch.give(std::move(sc));
  auto c = std::make_shared<h2_connection>(w, watch, l, peer);
  co_await c->run(std::move(initial));
}

}  // namespace tollgate::net
