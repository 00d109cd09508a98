#include "gateway/store/redis_records.hpp"

#include <hiredis/hiredis.h>
#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>

#include <future>

#include "gateway/store/redis_wire.hpp"

namespace tollgate::store {

namespace {

namespace asio = boost::asio;

/// Sets or removes each (name, value) pair of ARGV (an empty value removes), then moves the
/// version: one call, so a replica that reads the version moved reads the change too.
constexpr std::string_view change_script =
    "for i = 1, #ARGV, 2 do "
    "if ARGV[i + 1] == '' then redis.call('HDEL', KEYS[1], ARGV[i]) "
    "else redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end end "
    "return redis.call('INCR', KEYS[2])";

std::string_view text_of(const redisReply& r) {
  return {r.str, r.len};
}

}  // namespace

/// One write() waiting for its reply.
struct redis_records::waiter {
  std::promise<std::string> done;  ///< "" or why not
  records changes;                 ///< sent again after a redirection
  bool redirected = false;         ///< followed one MOVED already
};

redis_records::redis_records(const redis_options& o, asio::ssl::context* tls, std::string name,
                             std::chrono::nanoseconds poll, on_change changed)
    : o_(o),
      tls_(tls),
      hash_key_("{" + o.key_prefix + name + "}"),
      version_key_(hash_key_ + ":version"),
      poll_(poll),
      changed_(std::move(changed)) {}

redis_records::~redis_records() {
  io_.stop();
  if (thread_.joinable()) thread_.join();
}

void redis_records::start() {
  connect(o_.nodes.front().first, o_.nodes.front().second);
  tick();
  thread_ = std::thread([this] {
    auto guard = asio::make_work_guard(io_);
    io_.run();
  });
}

void redis_records::connect(const std::string& host, std::uint16_t port) {
  link_ = redis::link::make(io_, control_link(o_, tls_, host, port, 64), *this);
  link_->start();
}

void redis_records::tick() {
  if (link_ && link_->ready() && !reading_) {
    std::string command;
    redis::append_command(command, {"GET", version_key_});
    redis::pending_call c;
    c.kind = read_version;
    if (link_->call_now(command, std::move(c)) == redis::failure::none) reading_ = true;
  }
  timer_.expires_after(poll_);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) tick();
  });
}

void redis_records::send_change(const records& changes, std::shared_ptr<waiter> w) {
  std::string command;
  std::vector<std::string_view> args{"EVAL", change_script, "2", hash_key_, version_key_};
  for (const auto& [name, value] : changes) {
    args.push_back(name);
    args.push_back(value);
  }
  redis::command_args a;
  for (const std::string_view s : args) {
    a.argv.push_back(s.data());
    a.lengths.push_back(s.size());
    ++a.count;
  }
  redis::append_command(command, a);
  redis::pending_call c;
  c.kind = change;
  c.context = w;
  const redis::failure f =
      link_ && link_->ready() ? link_->call_now(command, std::move(c)) : redis::failure::io;
  if (f != redis::failure::none && w) w->done.set_value("Redis cannot be reached");
}

std::string redis_records::write(records changes, std::chrono::nanoseconds wait) {
  auto w = std::make_shared<waiter>();
  w->changes = std::move(changes);
  auto result = w->done.get_future();
  asio::post(io_, [this, w] { send_change(w->changes, w); });
  if (result.wait_for(wait) != std::future_status::ready) return "Redis did not answer in time";
  return result.get();
}

bool redis_records::redirected(const redisReply& reply) {
  if (reply.type != REDIS_REPLY_ERROR) return false;
  const auto r = redis::parse_redirect(text_of(reply));
  if (!r || r->ask) return false;
  spdlog::info("redis: {} is served by {}:{}", hash_key_, r->host, r->port);
  connect(r->host, r->port);
  return true;
}

void redis_records::on_reply(redis::pending_call& c, const redisReply* reply, redis::failure why) {
  if (c.kind == change) {
    auto w = std::static_pointer_cast<waiter>(c.context);
    if (!w) {
      if (reply != nullptr) redirected(*reply);
      return;
    }
    if (reply != nullptr && !w->redirected && redirected(*reply)) {
      // The new link connects first: the change is sent once it can be.
      w->redirected = true;
      auto retry = std::make_shared<asio::steady_timer>(io_, std::chrono::milliseconds(50));
      retry->async_wait(
          [this, w, retry](const boost::system::error_code&) { send_change(w->changes, w); });
      return;
    }
    if (reply == nullptr) {
      w->done.set_value(why == redis::failure::timeout ? "Redis did not answer in time"
                                                       : "the connection to Redis broke");
    } else if (reply->type == REDIS_REPLY_ERROR) {
      w->done.set_value("Redis: " + std::string(text_of(*reply)));
    } else {
      w->done.set_value("");
    }
    return;
  }
  if (reply == nullptr || redirected(*reply) || reply->type == REDIS_REPLY_ERROR) {
    if (reply != nullptr && reply->type == REDIS_REPLY_ERROR) {
      spdlog::warn("redis: reading {}: {}", hash_key_, text_of(*reply));
    }
    reading_ = false;
    return;
  }
  if (c.kind == read_version) {
    const std::string version =
        reply->type == REDIS_REPLY_STRING ? std::string(text_of(*reply)) : std::string();
    if (seen_ && *seen_ == version) {
      reading_ = false;
      return;
    }
    std::string command;
    redis::append_command(command, {"HGETALL", hash_key_});
    redis::pending_call next;
    next.kind = read_all;
    next.context = std::make_shared<std::string>(version);
    if (link_->call_now(command, std::move(next)) != redis::failure::none) reading_ = false;
    return;
  }
  // read_all: pairs of name and value.
  reading_ = false;
  if (reply->type != REDIS_REPLY_ARRAY) return;
  records all;
  for (std::size_t i = 0; i + 1 < reply->elements; i += 2) {
    const redisReply* n = reply->element[i];
    const redisReply* v = reply->element[i + 1];
    if (n == nullptr || v == nullptr || n->type != REDIS_REPLY_STRING ||
        v->type != REDIS_REPLY_STRING) {
      continue;
    }
    all.emplace_back(std::string(text_of(*n)), std::string(text_of(*v)));
  }
  seen_ = *std::static_pointer_cast<std::string>(c.context);
  const std::vector<std::string> stale = changed_(all);
  if (!stale.empty()) {
    records drop;
    for (const std::string& name : stale)
      drop.emplace_back(name, "");
    send_change(drop, nullptr);
  }
}

void redis_records::on_state(bool ready, const std::string& why) {
  if (ready) {
    if (down_logged_) spdlog::info("redis: {} can be read again", hash_key_);
    down_logged_ = false;
    seen_.reset();  // read everything again: changes may have been missed
    return;
  }
  if (!down_logged_) {
    spdlog::warn("redis: {} cannot be read ({}); the last copy read holds", hash_key_, why);
    down_logged_ = true;
  }
  reading_ = false;
}

}  // namespace tollgate::store
