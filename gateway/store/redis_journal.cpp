#include "gateway/store/redis_journal.hpp"

#include <hiredis/hiredis.h>
#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>

#include <future>
#include <utility>

#include "gateway/store/redis_wire.hpp"

namespace tollgate::store {

namespace {

namespace asio = boost::asio;
using clock_type = std::chrono::steady_clock;

/// Appends ARGV[2] to the stream KEYS[1] (at most ARGV[1] entries, roughly) and keeps the
/// stream for ARGV[3] ms after it: one call, so an entry never lands in a stream that does
/// not expire.
constexpr std::string_view append_script =
    "local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'e', ARGV[2]) "
    "redis.call('PEXPIRE', KEYS[1], ARGV[3]) "
    "return id";

/// Entries one read takes at most; a full page is followed by the next at once.
constexpr std::size_t page = 512;
constexpr std::string_view page_text = "512";

std::string_view text_of(const redisReply& r) {
  return {r.str, r.len};
}

/// The RESP command of `args`.
std::string command_of(const std::vector<std::string_view>& args) {
  redis::command_args a;
  for (const std::string_view s : args) {
    a.argv.push_back(s.data());
    a.lengths.push_back(s.size());
    ++a.count;
  }
  std::string out;
  redis::append_command(out, a);
  return out;
}

}  // namespace

/// An append or a deletion someone waits for.
struct redis_journal::waiter {
  std::promise<std::string> done;   ///< "" or why not
  std::string payload;              ///< an append's
  std::vector<std::string> keys;    ///< a deletion's
  long long removed = 0;            ///< what the deletion removed
  clock_type::time_point deadline;  ///< given up then
  std::uint8_t redirects = 0;       ///< MOVED followed so far
  bool settled = false;             ///< done was set
  bool sent = false;                ///< written to a connection (its fate may be unknown)
  bool fallback = false;            ///< an append nobody waits for: unsent, the owner's
  void settle(std::string why) {
    if (settled) return;
    settled = true;
    done.set_value(std::move(why));
  }
};

/// A claim under way: its handler, completed once.
struct redis_journal::claim_call {
  claim_handler done;
  void complete(boost::system::error_code ec, bool fresh) {
    if (!done) return;
    std::exchange(done, nullptr)(ec, fresh);
  }
};

namespace {

/// The events of a link a deletion was redirected to: replies go to the journal; its state
/// matters to nobody (a waiter gives up at its deadline).
class redirected_events final : public redis::link_events {
 public:
  explicit redirected_events(redis::link_events& to) : to_(to) {}
  void on_reply(redis::pending_call& c, const redisReply* reply, redis::failure why) override {
    to_.on_reply(c, reply, why);
  }
  void on_state(bool, const std::string&) override {}

 private:
  redis::link_events& to_;
};

}  // namespace

redis_journal::redis_journal(const redis_options& o, asio::ssl::context* tls, std::string name,
                             std::chrono::nanoseconds poll, std::size_t max_entries,
                             std::chrono::nanoseconds retention, on_entry read)
    : o_(o),
      tls_(tls),
      stream_key_("{" + o.key_prefix + name + "}"),
      spent_prefix_(stream_key_ + "spent:"),
      poll_(poll),
      max_entries_(std::to_string(max_entries)),
      retention_ms_(std::to_string(std::max<long long>(
          1000, std::chrono::duration_cast<std::chrono::milliseconds>(retention).count()))),
      read_(std::move(read)) {}

redis_journal::~redis_journal() {
  io_.stop();
  if (thread_.joinable()) thread_.join();
}

void redis_journal::start() {
  link_ = connect(o_.nodes.front().first, o_.nodes.front().second);
  tick();
  thread_ = std::thread([this] {
    auto guard = asio::make_work_guard(io_);
    io_.run();
  });
}

std::shared_ptr<redis::link> redis_journal::connect(const std::string& host, std::uint16_t port) {
  // A claim carries its own deadline (the per-decision timeout).
  redis::link_options l = control_link(o_, tls_, host, port, 4096);
  std::shared_ptr<redis::link> out;
  if (link_ == nullptr) {
    out = redis::link::make(io_, std::move(l), *this);
  } else {
    adapters_.push_back(
        std::make_unique<redirected_events>(static_cast<redis::link_events&>(*this)));
    out = redis::link::make(io_, std::move(l), *adapters_.back());
  }
  out->start();
  return out;
}

void redis_journal::tick() {
  if (every_poll_) every_poll_();
  read_more();
  timer_.expires_after(poll_);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) tick();
  });
}

void redis_journal::read_more() {
  if (!link_ || !link_->ready() || reading_) return;
  redis::pending_call c;
  c.kind = read_stream;
  if (link_->call_now(command_of({"XREAD", "COUNT", page_text, "STREAMS", stream_key_, last_id_}),
                      std::move(c)) == redis::failure::none) {
    reading_ = true;
  }
}

bool redis_journal::take_entries(const redisReply& reply) {
  // [[stream, [[id, [field, value, ...]], ...]]], or nil when nothing is new.
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements == 0) return false;
  const redisReply* stream = reply.element[0];
  if (stream == nullptr || stream->type != REDIS_REPLY_ARRAY || stream->elements < 2) return false;
  const redisReply* entries = stream->element[1];
  if (entries == nullptr || entries->type != REDIS_REPLY_ARRAY) return false;
  for (std::size_t i = 0; i < entries->elements; ++i) {
    const redisReply* e = entries->element[i];
    if (e == nullptr || e->type != REDIS_REPLY_ARRAY || e->elements < 2 ||
        e->element[0]->type != REDIS_REPLY_STRING) {
      continue;
    }
    last_id_ = std::string(text_of(*e->element[0]));
    const redisReply* fields = e->element[1];
    if (fields == nullptr || fields->type != REDIS_REPLY_ARRAY) continue;
    for (std::size_t f = 0; f + 1 < fields->elements; f += 2) {
      const redisReply* name = fields->element[f];
      const redisReply* value = fields->element[f + 1];
      if (name->type == REDIS_REPLY_STRING && text_of(*name) == "e" &&
          value->type == REDIS_REPLY_STRING) {
        read_(text_of(*value));
      }
    }
  }
  return entries->elements == page;
}

bool redis_journal::append(std::string payload) {
  if (!ready()) return false;
  auto w = std::make_shared<waiter>();
  w->payload = std::move(payload);
  w->deadline = clock_type::now() +
                std::max<std::chrono::nanoseconds>(o_.connect_timeout, std::chrono::seconds(1));
  w->fallback = true;
  asio::post(io_, [this, w] { send(w); });
  return true;
}

void redis_journal::unsent(const std::shared_ptr<waiter>& w) {
  w->settle("Redis cannot be reached");
  // Never written: the owner applies it itself rather than lose it (one written whose reply
  // did not come may be in the stream, and is left to it).
  if (w->fallback && !w->sent && on_unsent_) on_unsent_(w->payload);
}

std::string redis_journal::append_and_wait(std::string payload, std::chrono::nanoseconds wait) {
  if (!ready()) return "Redis cannot be reached";
  auto w = std::make_shared<waiter>();
  w->payload = std::move(payload);
  w->deadline = clock_type::now() + wait;
  auto result = w->done.get_future();
  asio::post(io_, [this, w] { send(w); });
  if (result.wait_for(wait) != std::future_status::ready) return "Redis did not answer in time";
  return result.get();
}

long long redis_journal::remove(std::vector<std::string> keys, std::chrono::nanoseconds wait,
                                std::string& error) {
  if (keys.empty()) return 0;
  auto w = std::make_shared<waiter>();
  w->keys = std::move(keys);
  w->deadline = clock_type::now() + wait;
  auto result = w->done.get_future();
  asio::post(io_, [this, w] { send(w); });
  if (result.wait_for(wait) != std::future_status::ready) {
    error = "Redis did not answer in time";
    return -1;
  }
  error = result.get();
  return error.empty() ? w->removed : -1;
}

void redis_journal::send(const std::shared_ptr<waiter>& w, redis::link* via) {
  redis::link* to = via != nullptr ? via : link_.get();
  if (to == nullptr || !to->ready()) {
    if (clock_type::now() >= w->deadline) return unsent(w);
    // Not up yet (a redirection's new link connecting, or a reconnection): again shortly.
    auto retry = std::make_shared<asio::steady_timer>(io_, std::chrono::milliseconds(20));
    retry->async_wait([this, w, retry, via](const boost::system::error_code&) { send(w, via); });
    return;
  }
  std::string command;
  redis::pending_call c;
  c.context = w;
  c.deadline = w->deadline;
  if (w->keys.empty()) {
    c.kind = add;
    command = command_of(
        {"EVAL", append_script, "1", stream_key_, max_entries_, w->payload, retention_ms_});
  } else {
    c.kind = delete_keys;
    std::vector<std::string_view> args{"DEL"};
    for (const auto& k : w->keys)
      args.push_back(k);
    command = command_of(args);
  }
  if (to->call_now(command, std::move(c)) != redis::failure::none) return unsent(w);
  w->sent = true;
}

void redis_journal::claim(std::string_view id, std::int64_t expires, claim_handler done) {
  auto call = std::make_shared<claim_call>();
  call->done = std::move(done);
  if (!ready()) {
    return call->complete(asio::error::not_connected, false);
  }
  const auto deadline = clock_type::now() + o_.timeout;
  std::string key = spent_prefix_ + std::string(id);
  asio::post(io_, [this, call, deadline, key = std::move(key), expires] {
    if (!link_ || !link_->ready()) return call->complete(asio::error::not_connected, false);
    redis::pending_call c;
    c.kind = claim_key;
    c.context = call;
    c.deadline = deadline;
    const std::string at = std::to_string(expires);
    if (link_->call_now(command_of({"SET", key, "1", "NX", "EXAT", at}), std::move(c)) !=
        redis::failure::none) {
      call->complete(asio::error::not_connected, false);
    }
  });
}

void redis_journal::on_reply(redis::pending_call& c, const redisReply* reply, redis::failure why) {
  switch (c.kind) {
    case claim_key: {
      auto call = std::static_pointer_cast<claim_call>(c.context);
      if (reply == nullptr || reply->type == REDIS_REPLY_ERROR) {
        if (reply != nullptr) spdlog::warn("redis: spending a proof: {}", text_of(*reply));
        return call->complete(why == redis::failure::timeout ? asio::error::timed_out
                                                             : asio::error::connection_aborted,
                              false);
      }
      // +OK when it was set; nil when the key was there: spent before.
      return call->complete({}, reply->type == REDIS_REPLY_STATUS);
    }
    case add:
    case delete_keys: {
      auto w = std::static_pointer_cast<waiter>(c.context);
      if (reply == nullptr) {
        if (!w->settled && !w->payload.empty() && w->keys.empty()) {
          spdlog::warn("redis: an entry of {} may be lost ({})", stream_key_,
                       why == redis::failure::timeout ? "no reply in time" : "connection broke");
        }
        return w->settle(why == redis::failure::timeout ? "Redis did not answer in time"
                                                        : "the connection to Redis broke");
      }
      if (reply->type == REDIS_REPLY_ERROR) {
        const auto r = redis::parse_redirect(text_of(*reply));
        if (r && !r->ask && w->redirects < 3) {
          ++w->redirects;
          if (c.kind == add) {
            // The stream itself moved: follow it for good.
            spdlog::info("redis: {} is served by {}:{}", stream_key_, r->host, r->port);
            link_ = connect(r->host, r->port);
            return send(w);
          }
          auto& other = others_[r->host + ":" + std::to_string(r->port)];
          if (!other) other = connect(r->host, r->port);
          return send(w, other.get());
        }
        return w->settle("Redis: " + std::string(text_of(*reply)));
      }
      if (reply->type == REDIS_REPLY_INTEGER) w->removed = reply->integer;
      // An append shows sooner on the replica that made it.
      if (c.kind == add) asio::post(io_, [this] { read_more(); });
      return w->settle("");
    }
    default:
      break;
  }
  // read_stream
  reading_ = false;
  if (reply == nullptr) return;
  if (reply->type == REDIS_REPLY_ERROR) {
    const auto r = redis::parse_redirect(text_of(*reply));
    if (r && !r->ask) {
      spdlog::info("redis: {} is served by {}:{}", stream_key_, r->host, r->port);
      link_ = connect(r->host, r->port);
    } else {
      spdlog::warn("redis: reading {}: {}", stream_key_, text_of(*reply));
    }
    return;
  }
  if (take_entries(*reply)) read_more();
}

void redis_journal::on_state(bool ready, const std::string& why) {
  ready_.store(ready, std::memory_order_release);
  if (ready) {
    if (down_logged_) spdlog::info("redis: {} can be reached again", stream_key_);
    down_logged_ = false;
    read_more();
    return;
  }
  if (!down_logged_) {
    spdlog::warn("redis: {} cannot be reached ({}); each replica keeps what it knows", stream_key_,
                 why);
    down_logged_ = true;
  }
  reading_ = false;
}

}  // namespace tollgate::store
