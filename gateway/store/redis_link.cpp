#include "gateway/store/redis_link.hpp"

#include <hiredis/hiredis.h>
#include <openssl/ssl.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include <array>
#include <optional>
#include <random>

#include "gateway/store/redis_wire.hpp"

namespace tollgate::store::redis {

namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using clock_type = std::chrono::steady_clock;
using boost::system::error_code;
constexpr auto use_tuple = asio::as_tuple(asio::deferred);

/// The link's own calls.
enum own_call : std::uint8_t { not_own = 0, own_auth = 1, own_refund = 2, own_script = 3 };

class link_impl final : public link {
 public:
  link_impl(asio::io_context& io, link_options o, link_events& events)
      : io_(io),
        o_(std::move(o)),
        events_(events),
        calls_timer_(io),
        wait_(io),
        jitter_(std::random_device{}()) {}

  void start() override {
    asio::co_spawn(io_, run(std::static_pointer_cast<link_impl>(shared_from_this())),
                   asio::detached);
  }

  bool ready() const noexcept override { return ready_; }

  failure call(std::string_view command, pending_call&& c) override {
    if (!ready_) return failure::io;
    if (fifo_.size() >= o_.max_in_flight) return failure::overload;
    send(command, std::move(c));
    return failure::none;
  }

  void reload_script() override {
    if (connected_) load_scripts(clock_type::now() + o_.connect_timeout);
  }

  failure call_now(std::string_view command, pending_call&& c) override {
    if (!ready_) return failure::io;
    send(command, std::move(c));
    return failure::none;
  }

  std::string name() const override { return where(); }

 private:
  // ---- the connection's life ------------------------------------------------------------

  /// Connects, serves, reconnects, for as long as the io_context runs; `self` keeps the link
  /// alive until then.
  asio::awaitable<void> run([[maybe_unused]] std::shared_ptr<link_impl> self) {
    auto backoff = std::chrono::milliseconds(50);
    for (;;) {
      std::string why = co_await connect_once();
      if (why.empty()) why = co_await serve();
      const bool was_ready = ready_;
      go_down();
      if (was_ready || !reported_down_) {
        events_.on_state(false, why);
        reported_down_ = true;
      }
      if (was_ready) backoff = std::chrono::milliseconds(50);
      // Backoff with jitter, so that the workers of several replicas do not reconnect in step.
      const auto pause = backoff + std::chrono::milliseconds(jitter_() % (backoff.count() / 2 + 1));
      wait_.expires_after(pause);
      co_await wait_.async_wait(use_tuple);
      backoff = std::min<std::chrono::milliseconds>(backoff * 2, std::chrono::seconds(2));
    }
  }

  /// Connects (TCP, then TLS), then sends AUTH and SCRIPT LOAD; "" when connected, else why not.
  asio::awaitable<std::string> connect_once() {
    const std::uint64_t gen = ++generation_;
    reader_ = make_reader();
    tcp::resolver resolver(io_);
    // One deadline for resolving, connecting and the TLS handshake: it closes what is open.
    bool expired = false;
    wait_.expires_after(o_.connect_timeout);
    wait_.async_wait([this, gen, &expired, &resolver](const error_code& ec) {
      if (ec || gen != generation_ || connected_) return;
      expired = true;
      resolver.cancel();
      close_socket();
    });
    auto [rec, results] =
        co_await resolver.async_resolve(o_.host, std::to_string(o_.port), use_tuple);
    if (rec) {
      wait_.cancel();
      co_return "resolve " + where() + ": " + (expired ? "timed out" : rec.message());
    }
    socket_.emplace(io_);
    auto [cec, ep] = co_await asio::async_connect(*socket_, results, use_tuple);
    if (cec) {
      wait_.cancel();
      co_return "connect " + where() + ": " + (expired ? "timed out" : cec.message());
    }
    socket_->set_option(tcp::no_delay(true));
    if (o_.tls != nullptr) {
      tls_.emplace(std::move(*socket_), *o_.tls);
      socket_.reset();
      const std::string& name = o_.server_name.empty() ? o_.host : o_.server_name;
      SSL_set_tlsext_host_name(tls_->native_handle(), name.c_str());
      tls_->set_verify_mode(asio::ssl::verify_peer);
      tls_->set_verify_callback(asio::ssl::host_name_verification(name));
      auto [hec] = co_await tls_->async_handshake(asio::ssl::stream_base::client, use_tuple);
      if (hec) {
        wait_.cancel();
        co_return "TLS handshake with " + where() + ": " + (expired ? "timed out" : hec.message());
      }
    }
    wait_.cancel();
    if (expired) co_return "connect " + where() + ": timed out";
    connected_ = true;
    // The link's own calls go first; calls of the store wait for ready_, set when the
    // script's SHA comes back.
    const auto deadline = clock_type::now() + o_.connect_timeout;
    std::string cmd;
    if (!o_.password.empty()) {
      if (o_.username.empty()) {
        append_command(cmd, {"AUTH", o_.password});
      } else {
        append_command(cmd, {"AUTH", o_.username, o_.password});
      }
      pending_call c;
      c.own = own_auth;
      c.deadline = deadline;
      send(cmd, std::move(c));
      cmd.clear();
    }
    load_scripts(deadline);
    co_return "";
  }

  /// SCRIPT LOAD of the refund script, then of the decision script: the link is ready when
  /// the second answers.
  void load_scripts(clock_type::time_point deadline) {
    for (const own_call which : {own_refund, own_script}) {
      std::string cmd;
      append_command(cmd,
                     {"SCRIPT", "LOAD", which == own_script ? gcra_script() : refund_script()});
      pending_call c;
      c.own = which;
      c.deadline = deadline;
      send(cmd, std::move(c));
    }
  }

  /// Reads replies until the connection ends; returns why it ended.
  asio::awaitable<std::string> serve() {
    for (;;) {
      std::size_t n = 0;
      error_code ec;
      if (tls_) {
        std::tie(ec, n) = co_await tls_->async_read_some(asio::buffer(in_), use_tuple);
      } else if (socket_) {
        std::tie(ec, n) = co_await socket_->async_read_some(asio::buffer(in_), use_tuple);
      } else {
        co_return closing_why_;
      }
      if (ec) {
        if (!closing_why_.empty()) co_return closing_why_;
        co_return ec == asio::error::eof ? "connection closed by " + where()
                                         : "read from " + where() + ": " + ec.message();
      }
      if (redisReaderFeed(reader_.get(), in_.data(), n) != REDIS_OK) {
        co_return "unreadable reply from " + where();
      }
      for (;;) {
        void* r = nullptr;
        if (redisReaderGetReply(reader_.get(), &r) != REDIS_OK) {
          co_return "unreadable reply from " + where() + " (" + reader_->errstr + ")";
        }
        if (r == nullptr) {
          // A reply not complete yet: what it may hold unparsed is bounded.
          if (reader_->len - reader_->pos > max_unparsed_bytes) {
            co_return "a reply larger than 4 MiB from " + where();
          }
          break;
        }
        const auto* reply = static_cast<const redisReply*>(r);
        if (fifo_.empty()) co_return "a reply nobody asked for from " + where();
        // Popped before anyone hears of it: what runs on a reply may make new calls.
        pending_call c = std::move(fifo_.front());
        fifo_.pop_front();
        if (c.own != not_own) {
          if (std::string why = own_reply(c, *reply); !why.empty()) co_return why;
          continue;
        }
        if (c.live) events_.on_reply(c, reply, failure::none);
      }
      if (!closing_why_.empty()) co_return closing_why_;
    }
  }

  /// The reply to AUTH or SCRIPT LOAD; "" when it is the expected one.
  std::string own_reply(const pending_call& c, const redisReply& r) {
    const std::string_view text = r.str != nullptr ? std::string_view(r.str, r.len) : "";
    if (c.own == own_auth) {
      if (r.type == REDIS_REPLY_ERROR) return "AUTH at " + where() + ": " + std::string(text);
      return "";
    }
    if (r.type == REDIS_REPLY_ERROR) return "SCRIPT LOAD at " + where() + ": " + std::string(text);
    if (r.type != REDIS_REPLY_STRING || text != (c.own == own_script ? gcra_sha() : refund_sha())) {
      return "SCRIPT LOAD at " + where() + " answered an unexpected SHA";
    }
    if (c.own != own_script) return "";
    if (!ready_) {
      ready_ = true;
      reported_down_ = false;
      events_.on_state(true, where());
    }
    return "";
  }

  /// Ends the connection in hand: every call in flight fails (io), nothing more is sent.
  void go_down() {
    ready_ = false;
    connected_ = false;
    ++generation_;
    close_socket();
    socket_.reset();
    tls_.reset();
    closing_why_.clear();
    out_.clear();
    calls_timer_.cancel();
    timer_armed_ = false;
    std::deque<pending_call> failed;
    failed.swap(fifo_);
    for (pending_call& c : failed) {
      if (c.own == not_own && c.live) events_.on_reply(c, nullptr, failure::io);
    }
  }

  /// Closes the socket, so that the read and the write in flight end.
  void close_socket() {
    error_code ignored;
    if (tls_) tls_->lowest_layer().close(ignored);
    if (socket_) socket_->close(ignored);
  }

  /// Ends the connection for `why` (the read loop reports it).
  void abandon(std::string why) {
    if (closing_why_.empty()) closing_why_ = std::move(why);
    close_socket();
  }

  std::string where() const { return o_.host + ":" + std::to_string(o_.port); }

  // ---- calls ------------------------------------------------------------------------------

  void send(std::string_view command, pending_call&& c) {
    out_.append(command);
    c.sent = clock_type::now();
    if (c.deadline == clock_type::time_point{}) c.deadline = c.sent + o_.timeout;
    fifo_.push_back(std::move(c));
    // Sooner than the timer: armed for this call (no scan of the calls on the send path).
    if (!timer_armed_ || calls_timer_.expiry() > fifo_.back().deadline) {
      arm_at(fifo_.back().deadline);
    }
    if (!write_busy_) flush();
  }

  /// Writes what was queued; what is queued meanwhile goes with the next write.
  void flush() {
    if (out_.empty()) return;
    writing_.swap(out_);
    write_busy_ = true;
    auto done = [self = shared_from_this(), this, gen = generation_](const error_code& ec,
                                                                     std::size_t) {
      write_busy_ = false;
      writing_.clear();
      if (gen != generation_) return;
      if (ec) {
        abandon("write to " + where() + ": " + ec.message());
        return;
      }
      flush();
    };
    if (tls_) {
      asio::async_write(*tls_, asio::buffer(writing_), std::move(done));
    } else if (socket_) {
      asio::async_write(*socket_, asio::buffer(writing_), std::move(done));
    } else {
      write_busy_ = false;
      writing_.clear();
    }
  }

  /// Arms the deadline timer for the earliest deadline of a call still waited for, or for the
  /// stall of the oldest one when none is sooner.
  void arm_timer() {
    if (fifo_.empty()) return;
    clock_type::time_point at = fifo_.front().deadline + stall_limit();
    // Every call is looked at (at most max_in_flight, once per deadline that comes, not per
    // call): deadlines need not follow send order (an ASKING shares its call's).
    for (const pending_call& c : fifo_) {
      if (c.live) at = std::min(at, c.deadline);
    }
    arm_at(at);
  }

  /// Arms the deadline timer for `at`; expire() then arms it for what is left.
  void arm_at(clock_type::time_point at) {
    timer_armed_ = true;
    calls_timer_.expires_at(at);
    calls_timer_.async_wait(
        [self = shared_from_this(), this, gen = generation_](const error_code& ec) {
          if (ec || gen != generation_) return;
          timer_armed_ = false;
          expire();
        });
  }

  /// A Redis that has not answered its oldest call for this long is taken for gone.
  std::chrono::nanoseconds stall_limit() const {
    return std::max<std::chrono::nanoseconds>(o_.connect_timeout, o_.timeout * 4);
  }

  /// Fails the calls whose deadline passed; ends a connection whose oldest call stalls.
  void expire() {
    const auto now = clock_type::now();
    for (std::size_t i = 0; i < fifo_.size(); ++i) {
      pending_call& c = fifo_[i];
      if (c.deadline > now || !c.live) continue;
      c.live = false;
      if (c.own != not_own) {
        abandon((c.own == own_auth ? "AUTH at " : "SCRIPT LOAD at ") + where() + ": timed out");
        return;
      }
      events_.on_reply(c, nullptr, failure::timeout);
    }
    if (!fifo_.empty() && fifo_.front().deadline + stall_limit() <= now) {
      abandon(where() + " stopped answering");
      return;
    }
    arm_timer();
  }

  asio::io_context& io_;
  link_options o_;
  link_events& events_;
  std::optional<tcp::socket> socket_;                  ///< plain connection
  std::optional<asio::ssl::stream<tcp::socket>> tls_;  ///< TLS connection
  reader_ptr reader_;                                  ///< hiredis's RESP reader, bounded
  std::array<char, 16 * 1024> in_{};                   ///< bytes read
  std::deque<pending_call> fifo_;                      ///< calls in send order
  std::string out_;                                    ///< commands not yet written
  std::string writing_;                                ///< commands being written
  asio::steady_timer calls_timer_;                     ///< deadline of the oldest call
  asio::steady_timer wait_;                            ///< connect deadline, backoff
  std::minstd_rand jitter_;                            ///< backoff jitter
  std::string closing_why_;       ///< why the connection in hand is being ended
  std::uint64_t generation_ = 0;  ///< connections so far (stale handlers see a newer one)
  bool ready_ = false;            ///< calls may be made
  bool connected_ = false;        ///< connected (handshake may still run)
  bool write_busy_ = false;       ///< a write is in flight
  bool timer_armed_ = false;      ///< calls_timer_ waits
  bool reported_down_ = false;    ///< the owner heard that the link is down
};

}  // namespace

std::shared_ptr<link> link::make(boost::asio::io_context& io, link_options o, link_events& events) {
  return std::make_shared<link_impl>(io, std::move(o), events);
}

}  // namespace tollgate::store::redis
