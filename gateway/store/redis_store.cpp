#include "gateway/store/redis_store.hpp"

#include <hiredis/hiredis.h>
#include <spdlog/spdlog.h>

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/execution.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <functional>
#include <optional>
#include <stdexcept>

#include "gateway/store/over_limit_cache.hpp"
#include "gateway/store/redis_link.hpp"
#include "gateway/store/redis_wire.hpp"

namespace tollgate::store {

namespace {

using clock_type = std::chrono::steady_clock;
using metrics::store_error;
using metrics::store_source;
using redis::group_mask;

/// What a call to Redis is (pending_call::kind).
enum call_kind : std::uint8_t {
  batch,   ///< one server: the decisions made in one turn of the event loop, in one call
  whole,   ///< every limit of a request in one script call (one slot)
  part,    ///< the limits of a request in one slot (Cluster, limits in several slots)
  refund,  ///< gives back what a part committed
  slots,   ///< CLUSTER SLOTS
  asking,  ///< ASKING before a call sent where an ASK redirection said
};

constexpr std::uint16_t no_node = 0xffff;
constexpr std::size_t slot_count = 16384;
/// Redirections followed per call before fail_mode decides.
constexpr std::uint8_t max_redirects = 3;
/// Most Redis servers one worker connects to (Cluster primaries named by slot maps and
/// redirections).
constexpr std::size_t max_nodes = 64;

/// Completes `done` through its executor, never inline (the initiating function has not
/// returned yet).
void complete_later(decide_handler done, boost::system::error_code ec) {
  namespace execution = boost::asio::execution;
  const auto ex =
      boost::asio::prefer(boost::asio::get_associated_executor(done), execution::blocking.never);
  ex.execute([done = std::move(done), ec]() mutable { std::move(done)(ec); });
}

const boost::system::error_code unavailable =
    boost::asio::error::make_error_code(boost::asio::error::timed_out);

/// A decision whose limits live in several Cluster slots: one script call per slot, all sent
/// at once; it completes when the last answers. Owned by its calls (shared), so that it dies
/// with them whatever happens to the connections.
struct split_decision {
  struct part_state {
    group_mask groups = 0;         ///< the request's groups in this slot
    std::uint16_t slot = 0;        ///< their slot
    std::uint16_t node = no_node;  ///< where the reply came from
    bool answered = false;         ///< a reply came
    redis::script_reply reply;     ///< ... and said this
  };
  const limit::limit_request* req = nullptr;
  limit::decision* out = nullptr;
  decide_handler done;
  clock_type::time_point sent;
  std::array<part_state, limit::max_groups> parts;
  std::uint8_t count = 0;    ///< parts
  std::uint8_t waiting = 0;  ///< parts not yet answered or failed
  bool failed = false;       ///< a part got no usable reply

  split_decision(const limit::limit_request* r, limit::decision* o, decide_handler&& d)
      : req(r), out(o), done(std::move(d)) {}
};

/// Decisions sent together to one server (its calls' handlers, in the order of the batch).
struct batch_decision {
  std::vector<redis::pending_call> items;
  /// Per item: answered already (by fail_mode, its own deadline having passed first).
  std::vector<char> settled;
  bool timeout_counted = false;  ///< one timeout counted for the call, however many items
};

/// Runs `on_shutdown` when its io_context shuts down, before the io_context is gone: what a
/// worker holds outside its io_context's handlers (decisions waiting for the next batch, whose
/// handlers own session frames) is let go then, as Asio lets go of its own pending handlers.
class shutdown_hook final : public boost::asio::execution_context::service {
 public:
  using key_type = shutdown_hook;
  static boost::asio::execution_context::id id;
  explicit shutdown_hook(boost::asio::execution_context& c)
      : boost::asio::execution_context::service(c) {}
  std::vector<std::function<void()>> on_shutdown;  ///< one per store side attached here

 private:
  void shutdown() override {
    for (auto& f : on_shutdown)
      f();
    on_shutdown.clear();
  }
};
boost::asio::execution_context::id shutdown_hook::id;

}  // namespace

/// One worker's connections to Redis (one per server, or per Cluster primary), the Cluster's
/// slot map, the over-limit cache and the counters. Everything but `ready` and the counters'
/// values is touched by that worker's thread only.
class redis_store::worker_side final {
 public:
  worker_side(redis_store& store, std::uint32_t index) : store_(store), index_(index) {
    for (const auto& [host, port] : store_.o_.nodes)
      add_node(host, port);
    if (cluster()) slots_.assign(slot_count, no_node);
  }

  void attach(boost::asio::io_context& io) {
    io_ = &io;
    settle_timer_.emplace(io);
    boost::asio::use_service<shutdown_hook>(io).on_shutdown.emplace_back([this] {
      std::vector<redis::pending_call> dropped;
      dropped.swap(waiting_);
      out_.clear();
      // The timer goes with the io_context (this side outlives it).
      settle_timer_.reset();
      settle_armed_ = false;
    });
    for (auto& n : nodes_)
      connect(*n);
  }

  bool try_decide(const limit::limit_request& req, limit::decision& out) {
    if (cache_.reject(req, out)) {
      counters.decisions[static_cast<std::size_t>(store_source::cache)].add();
      return true;
    }
    if (ready.load(std::memory_order_relaxed)) return false;
    // Redis is away: fail_mode decides at once, without waiting for a timeout (closed
    // answers through start_decide, which reports the failure).
    if (store_.o_.on_failure == fail_mode::closed) return false;
    return decide_without_redis(req, out);
  }

  void start_decide(const limit::limit_request& req, limit::decision& out, decide_handler done) {
    if (!cluster()) {
      if (!ready.load(std::memory_order_relaxed)) {
        // Known to be away: no call is made, and none fails.
        const bool decided = decide_without_redis(req, out);
        complete_later(std::move(done), decided ? boost::system::error_code{} : unavailable);
        return;
      }
      // One server: the decisions made while a call is out wait for its reply and go in the
      // next call together (the first goes at the end of this turn of the event loop), so
      // that under load one script run decides many (a key repeated in a batch is read and
      // written once) at the cost of at most one more round trip.
      // The timeout runs from now, not from when the batch is written: a decision that waits
      // for the call before it must not wait a whole timeout more after it.
      waiting_.emplace_back(&req, &out, std::move(done));
      waiting_.back().deadline = clock_type::now() + store_.o_.timeout;
      if (batches_out_ == 0) schedule_batches();
      return;
    }
    // Cluster: the request's groups by slot. Address keys share their network's tag, so they
    // are one part; a global or key limit is a part of its own unless it shares a slot.
    split_decision::part_state parts[limit::max_groups];
    std::uint8_t count = 0;
    std::uint16_t address_slot = no_node;
    for (std::uint8_t g = 0; g < req.group_count; ++g) {
      std::uint16_t slot;
      if (req.groups[g].spec->source == limit::key_source::address && address_slot != no_node) {
        slot = address_slot;
      } else {
        key_.clear();
        redis::append_key(key_, store_.o_.key_prefix, req, g);
        slot = redis::key_slot(key_);
        if (req.groups[g].spec->source == limit::key_source::address) address_slot = slot;
      }
      std::uint8_t p = 0;
      while (p < count && parts[p].slot != slot)
        ++p;
      if (p == count) parts[count++].slot = slot;
      parts[p].groups |= static_cast<group_mask>(1u << g);
    }
    if (count == 1) {
      // One slot: one script call, all-or-nothing in Redis, as with one server.
      send_whole(redis::pending_call(&req, &out, std::move(done)), parts[0].slot, true);
      return;
    }
    auto split = std::make_shared<split_decision>(&req, &out, std::move(done));
    split->sent = clock_type::now();
    split->count = count;
    split->waiting = count;
    const auto deadline = split->sent + store_.o_.timeout;
    for (std::uint8_t p = 0; p < count; ++p) {
      split->parts[p].groups = parts[p].groups;
      split->parts[p].slot = parts[p].slot;
    }
    for (std::uint8_t p = 0; p < count; ++p) {
      redis::pending_call c;
      c.part = p;
      c.context = split;
      c.deadline = deadline;
      if (!send_part(split, std::move(c))) --split->waiting;
    }
    // Every part refused at once: completed later (this function has not returned).
    if (split->waiting == 0) finish_split(*split, true);
  }

  /// Whether Redis (every node the slot map names) can be used.
  std::atomic<bool> ready{false};
  metrics::store_counters counters;  ///< this worker's

 private:
  /// One Redis server this worker talks to, and its link.
  struct node final : redis::link_events {
    node(worker_side& w, std::uint16_t i, std::string h, std::uint16_t p)
        : owner(w), index(i), host(std::move(h)), port(p) {}
    void on_reply(redis::pending_call& c, const redisReply* reply, redis::failure why) override {
      owner.on_reply(*this, c, reply, why);
    }
    void on_state(bool up, const std::string& why) override { owner.on_node_state(*this, up, why); }

    worker_side& owner;
    std::uint16_t index;
    std::string host;
    std::uint16_t port;
    redis::link* link = nullptr;  ///< owned by its coroutine on the worker's io_context
    bool up = false;              ///< link ready
  };

  bool cluster() const noexcept { return store_.o_.cluster; }

  node& add_node(const std::string& host, std::uint16_t port) {
    nodes_.push_back(
        std::make_unique<node>(*this, static_cast<std::uint16_t>(nodes_.size()), host, port));
    return *nodes_.back();
  }

  /// The node at host:port, or nullptr.
  node* find_node(const std::string& host, std::uint16_t port) {
    for (auto& n : nodes_) {
      if (n->host == host && n->port == port) return n.get();
    }
    return nullptr;
  }

  /// The node at host:port, made (and connected) if new.
  node& node_at(const std::string& host, std::uint16_t port) {
    if (node* n = find_node(host, port)) return *n;
    node& n = add_node(host, port);
    if (io_ != nullptr) connect(n);
    return n;
  }

  void connect(node& n) {
    redis::link_options o;
    o.host = n.host;
    o.port = n.port;
    o.username = store_.o_.username;
    o.password = store_.o_.password;
    o.timeout = store_.o_.timeout;
    o.connect_timeout = store_.o_.connect_timeout;
    o.tls = store_.tls_.get();
    o.server_name = store_.o_.tls_server_name;
    // Owned by its own coroutine on the io_context (so that it dies with it, before the
    // store); the node only points at it.
    auto l = redis::link::make(*io_, std::move(o), n);
    n.link = l.get();
    l->start();
  }

  /// The node serving `slot`, or nullptr when none is known or usable.
  node* node_for(std::uint16_t slot) {
    if (!cluster()) return nodes_[0]->up ? nodes_[0].get() : nullptr;
    const std::uint16_t i = slots_[slot];
    if (i == no_node || !nodes_[i]->up) return nullptr;
    return nodes_[i].get();
  }

  // ---- sending ------------------------------------------------------------------------------

  void schedule_batches() {
    if (flush_posted_) return;
    flush_posted_ = true;
    boost::asio::post(*io_, [this] { send_batches(); });
  }

  /// Sends the decisions waiting, max_batch to a call.
  void send_batches() {
    flush_posted_ = false;
    std::vector<redis::pending_call> waited, all;
    waited.swap(waiting_);
    all.reserve(waited.size());
    // Decisions whose own time ran out while they waited for the call before are answered by
    // fail_mode now, and not sent: Redis would charge what the client was already told.
    const auto now = clock_type::now();
    bool expired = false;
    for (auto& c : waited) {
      if (c.deadline > now) {
        all.emplace_back(std::move(c));
        continue;
      }
      expired = true;
      finish_without_redis(c);
    }
    if (expired) count_failure(redis::failure::timeout);
    for (std::size_t first = 0; first < all.size(); first += redis::max_batch) {
      auto b = std::make_shared<batch_decision>();
      const std::size_t last = std::min(all.size(), first + redis::max_batch);
      b->items.reserve(last - first);
      entries_.clear();
      // Each item keeps its own deadline (asked + timeout): settle_due answers it by
      // fail_mode when that passes first. The call waits for the latest of them.
      auto deadline = clock_type::time_point::min();
      for (std::size_t i = first; i < last; ++i) {
        deadline = std::max(deadline, all[i].deadline);
        b->items.emplace_back(std::move(all[i]));
        entries_.push_back({b->items.back().req});
      }
      b->settled.assign(b->items.size(), 0);
      node* to = node_for(0);
      redis::failure why = redis::failure::io;
      if (to != nullptr) {
        redis::build_call(args_, "EVALSHA", redis::gcra_sha(), store_.o_.key_prefix, entries_);
        command_.clear();
        if (redis::append_command(command_, args_)) {
          redis::pending_call c;
          c.kind = batch;
          c.context = b;
          c.deadline = deadline;
          why = to->link->call(command_, std::move(c));
          if (why == redis::failure::none) {
            ++batches_out_;
            out_.push_back(b);
            arm_settle(b->items.front().deadline);  // the first asked is the first due
            continue;
          }
        }
      }
      count_failure(why);
      for (auto& item : b->items)
        finish_without_redis(item);
    }
  }

  /// Sends a whole decision to the node of `slot` (or the given node), or decides it by
  /// fail_mode when it cannot be sent. `initiating`: called from start_decide (complete later).
  void send_whole(redis::pending_call&& c, std::uint16_t slot, bool initiating,
                  node* to = nullptr) {
    if (to == nullptr) to = node_for(slot);
    redis::failure why = redis::failure::io;
    if (to != nullptr) {
      redis::build_call(args_, "EVALSHA", redis::gcra_sha(), store_.o_.key_prefix, *c.req);
      command_.clear();
      if (redis::append_command(command_, args_)) {
        c.kind = whole;
        why = to->link->call(command_, std::move(c));
        if (why == redis::failure::none) return;
      }
    }
    count_failure(why);
    const bool decided = decide_without_redis(*c.req, *c.out);
    if (initiating) {
      complete_later(std::move(c.done), decided ? boost::system::error_code{} : unavailable);
    } else {
      std::move(c.done)(decided ? boost::system::error_code{} : unavailable);
    }
  }

  /// Sends part c.part of `split` to the node of its slot (or the given node); false (and the
  /// split failed) when it cannot be sent.
  bool send_part(const std::shared_ptr<split_decision>& split, redis::pending_call&& c,
                 node* to = nullptr) {
    const auto& p = split->parts[c.part];
    if (to == nullptr) to = node_for(p.slot);
    redis::failure why = redis::failure::io;
    if (to != nullptr) {
      redis::build_call(args_, "EVALSHA", redis::gcra_sha(), store_.o_.key_prefix, *split->req, {},
                        p.groups);
      command_.clear();
      if (redis::append_command(command_, args_)) {
        c.kind = part;
        why = to->link->call(command_, std::move(c));
        if (why == redis::failure::none) return true;
      }
    }
    count_failure(why);
    split->failed = true;
    return false;
  }

  // ---- replies ------------------------------------------------------------------------------

  void on_reply(node& from, redis::pending_call& c, const redisReply* reply, redis::failure why) {
    switch (c.kind) {
      case batch:
        return on_batch(from, c, reply, why);
      case whole:
        return on_whole(from, c, reply, why);
      case part:
        return on_part(from, c, reply, why);
      case refund:
        if (reply == nullptr) {
          count_failure(why);
        } else if (reply->type == REDIS_REPLY_ERROR) {
          counters.errors[static_cast<std::size_t>(store_error::script)].add();
          log_error(std::string_view(reply->str, reply->len));
        }
        return;
     case slots:
        if (reply != nullptr) read_slot_map(from, *reply);
        return;
      default:
        return;  // asking: +OK
    }
  }

  /// An error reply that redirects: the node to ask, after updating the slot map (MOVED).
  /// nullptr when `reply` is no redirection or it cannot be followed.
  node* follow(const redisReply& reply, redis::pending_call& c) {
    const auto r = redis::parse_redirect(std::string_view(reply.str, reply.len));
    if (!r || !cluster()) return nullptr;
    counters.errors[static_cast<std::size_t>(store_error::redirect)].add();
    if (c.redirects >= max_redirects) return nullptr;
    if (nodes_.size() >= max_nodes && find_node(r->host, r->port) == nullptr) return nullptr;
    node& to = node_at(r->host, r->port);
    if (!r->ask) {
      slots_[r->slot] = to.index;
      refresh_slot_map();
    }
    if (!to.up) return nullptr;
    if (r->ask) {
      // ASKING, then the call itself, on the same connection, one after the other.
      std::string cmd;
      redis::append_command(cmd, {"ASKING"});
      redis::pending_call a;
      a.kind = asking;
      a.deadline = c.deadline;
      if (to.link->call_now(cmd, std::move(a)) != redis::failure::none) return nullptr;
    }
    ++c.redirects;
    return &to;
  }

  void on_batch(node& from, redis::pending_call& c, const redisReply* reply, redis::failure why) {
    auto b = std::static_pointer_cast<batch_decision>(c.context);
    std::erase(out_, b);
    // The decisions that waited for this call go now.
    --batches_out_;
    if (!waiting_.empty()) schedule_batches();
    if (reply == nullptr || reply->type == REDIS_REPLY_ERROR) {
      if (reply == nullptr) {
        if (why != redis::failure::timeout || !b->timeout_counted) count_failure(why);
      } else {
        count_error_reply(from, *reply);
      }
      for (std::size_t i = 0; i < b->items.size(); ++i) {
        if (!b->settled[i]) finish_without_redis(b->items[i]);
      }
      return;
    }
    entries_.clear();
    for (const auto& item : b->items)
      entries_.push_back({item.req});
    core::nanos redis_now = 0;
    const bool shaped = redis::read_now(*reply, entries_, redis_now);
    const double latency = std::chrono::duration<double>(clock_type::now() - c.sent).count();
    std::size_t at = 2;
    redis::script_reply r;
    for (std::size_t i = 0; i < b->items.size(); ++i) {
      redis::pending_call& item = b->items[i];
      if (!shaped || !redis::read_entry(*reply, at, entries_[i], r)) {
        counters.errors[static_cast<std::size_t>(store_error::script)].add();
        log_error("a reply of the wrong shape");
        // Entries after a malformed one cannot be found: all of them by fail_mode.
        for (; i < b->items.size(); ++i) {
          if (!b->settled[i]) finish_without_redis(b->items[i]);
        }
        return;
      }
      // Answered by fail_mode already: Redis's verdict comes too late to tell (what it
      // committed stays, as for any call that times out after Redis ran it).
      if (b->settled[i]) continue;
      redis::assemble(*item.req, r, r.admitted, r.shadow_limited, *item.out);
      counters.decisions[static_cast<std::size_t>(store_source::redis)].add();
      counters.latency.observe(latency, metrics::store_buckets);
      cache_.remember(*item.req, *item.out);
      std::move(item.done)(boost::system::error_code{});
    }
  }

  void on_whole(node& from, redis::pending_call& c, const redisReply* reply, redis::failure why) {
    if (reply == nullptr) {
      count_failure(why);
      return finish_without_redis(c);
    }
    if (reply->type == REDIS_REPLY_ERROR) {
      if (node* to = follow(*reply, c)) return send_whole(std::move(c), 0, false, to);
      count_error_reply(from, *reply);
      return finish_without_redis(c);
    }
    if (!redis::decode_decision(*reply, *c.req, *c.out)) {
      counters.errors[static_cast<std::size_t>(store_error::script)].add();
      log_error("a reply of the wrong shape");
      return finish_without_redis(c);
    }
    counters.decisions[static_cast<std::size_t>(store_source::redis)].add();
    counters.latency.observe(std::chrono::duration<double>(clock_type::now() - c.sent).count(),
                             metrics::store_buckets);
    cache_.remember(*c.req, *c.out);
    std::move(c.done)(boost::system::error_code{});
  }

  void on_part(node& from, redis::pending_call& c, const redisReply* reply, redis::failure why) {
    auto split = std::static_pointer_cast<split_decision>(c.context);
    auto& p = split->parts[c.part];
    if (reply == nullptr) {
      count_failure(why);
      split->failed = true;
    } else if (reply->type == REDIS_REPLY_ERROR) {
      node* to = follow(*reply, c);
      if (to != nullptr && send_part(split, std::move(c), to)) return;
      if (to == nullptr) count_error_reply(from, *reply);
      split->failed = true;
    } else if (!redis::read_reply(*reply, *split->req, p.groups, p.reply)) {
      counters.errors[static_cast<std::size_t>(store_error::script)].add();
      log_error("a reply of the wrong shape");
      split->failed = true;
    } else {
      p.answered = true;
      p.node = from.index;
    }
    if (--split->waiting == 0) finish_split(*split, false);
  }

  /// Every part of `s` answered or failed: the decision, and refunds of what parts committed
  /// that the whole request must not keep (DESIGN §11: never over-admit).
  void finish_split(split_decision& s, bool initiating) {
    const limit::limit_request& req = *s.req;
    // The request's verdict over every part; shadowed limits decide nothing.
    bool admitted = !s.failed, shadow_ok = true;
    redis::script_reply all;
    for (std::uint8_t i = 0; i < s.count; ++i) {
      const auto& p = s.parts[i];
      if (!p.answered) continue;
      admitted &= p.reply.admitted;
      for (std::uint8_t g = 0; g < req.group_count; ++g) {
        if ((p.groups >> g & 1) == 0) continue;
        all.tiers[g] = p.reply.tiers[g];
        if (req.groups[g].spec->shadow) {
          for (const auto& t : p.reply.tiers[g])
            shadow_ok &= t.allowed != 0;
        }
      }
    }
    // What each part committed (its own rule) that the request as a whole does not.
    for (std::uint8_t i = 0; i < s.count; ++i) {
      const auto& p = s.parts[i];
      if (!p.answered || !p.reply.admitted) continue;
      group_mask give_back = 0;
      for (std::uint8_t g = 0; g < req.group_count; ++g) {
        if ((p.groups >> g & 1) == 0) continue;
        const bool shadow = req.groups[g].spec->shadow;
        const bool committed = !shadow || !p.reply.shadow_limited;
        const bool keep = admitted && (!shadow || shadow_ok);
        if (committed && !keep) give_back |= static_cast<group_mask>(1u << g);
      }
      if (give_back != 0) send_refund(req, p, give_back);
    }
    boost::system::error_code ec;
    if (s.failed) {
      if (!decide_without_redis(req, *s.out)) ec = unavailable;
    } else {
      redis::assemble(req, all, admitted, !shadow_ok, *s.out);
      counters.decisions[static_cast<std::size_t>(store_source::redis)].add();
      counters.latency.observe(std::chrono::duration<double>(clock_type::now() - s.sent).count(),
                               metrics::store_buckets);
      cache_.remember(req, *s.out);
    }
    if (initiating) {
      complete_later(std::move(s.done), ec);
    } else {
      std::move(s.done)(ec);
    }
  }

  void send_refund(const limit::limit_request& req, const split_decision::part_state& p,
                   group_mask groups) {
    node& to = *nodes_[p.node];
    if (!to.up) return;  // the connection is gone: the charge drains by itself (c·T at most)
    redis::command_args args;
    redis::build_refund(args, store_.o_.key_prefix, req, groups, p.reply);
    std::string cmd;
    if (!redis::append_command(cmd, args)) return;
    redis::pending_call c;
    c.kind = refund;
    c.deadline = clock_type::now() + store_.o_.connect_timeout;
    to.link->call_now(cmd, std::move(c));
  }

  // ---- the slot map -------------------------------------------------------------------------

  /// Asks a usable node for the slot map, at most once a second.
  void refresh_slot_map() {
    const auto now = clock_type::now();
    if (map_asked_ != clock_type::time_point{} && now - map_asked_ < std::chrono::seconds(1)) {
      return;
    }
    for (auto& n : nodes_) {
      if (!n->up) continue;
      std::string cmd;
      redis::append_command(cmd, {"CLUSTER", "SLOTS"});
      redis::pending_call c;
      c.kind = slots;
      c.deadline = now + store_.o_.connect_timeout;
      if (n->link->call_now(cmd, std::move(c)) == redis::failure::none) {
        map_asked_ = now;
        return;
      }
    }
  }

  /// CLUSTER SLOTS: [[start, end, [host, port, id], replicas...], ...].
  void read_slot_map(node& from, const redisReply& r) {
    if (r.type != REDIS_REPLY_ARRAY) {
      spdlog::error("store: CLUSTER SLOTS at {}:{} did not answer a slot map{}", from.host,
                    from.port, r.type == REDIS_REPLY_ERROR ? ": " + std::string(r.str, r.len) : "");
      return;
    }
    std::vector<std::uint16_t> map(slot_count, no_node);
    for (const redis::slot_range& range : redis::parse_slot_map(r, from.host)) {
      // A map naming more primaries than any real cluster has is not followed past the cap.
      if (nodes_.size() >= max_nodes && find_node(range.host, range.port) == nullptr) continue;
      const node& n = node_at(range.host, range.port);
      for (std::size_t slot = range.first; slot <= range.last; ++slot)
        map[slot] = n.index;
    }
    const std::size_t known =
        slot_count - static_cast<std::size_t>(std::count(map.begin(), map.end(), no_node));
    if (!map_known_ || map != slots_) {
      spdlog::info("store: worker {} has the cluster slot map from {}:{} ({} of {} slots served)",
                   index_, from.host, from.port, known, slot_count);
    }
    slots_ = std::move(map);
    map_known_ = true;
    update_ready();
  }

  // ---- state --------------------------------------------------------------------------------

  void on_node_state(node& n, bool up, const std::string& why) {
    n.up = up;
    if (up) {
      spdlog::info("store: worker {} connected to redis {}", index_, why);
      if (cluster()) refresh_slot_map();
    } else {
      counters.errors[static_cast<std::size_t>(store_error::connect)].add();
      spdlog::warn("store: worker {} cannot use redis ({}); fail_mode {} decides until it can",
                   index_, why, fail_mode_name(store_.o_.on_failure));
      // A node gone may mean a failover: ask another node where the slots are now.
      if (cluster()) refresh_slot_map();
    }
    update_ready();
  }

  /// Usable: the server is up; with Cluster, the slot map is known and every node it names
  /// is up.
  void update_ready() {
    bool r = true;
    if (!cluster()) {
      r = nodes_[0]->up;
    } else if (!map_known_) {
      r = false;
    } else {
      std::vector<bool> used(nodes_.size(), false);
      for (const std::uint16_t i : slots_) {
        if (i == no_node) {
          r = false;
          break;
        }
        used[i] = true;
      }
      for (std::size_t i = 0; r && i < nodes_.size(); ++i)
        r = !used[i] || nodes_[i]->up;
    }
    ready.store(r, std::memory_order_relaxed);
  }

  // ---- fail_mode ----------------------------------------------------------------------------

  /// Decides by fail_mode: true with `out` filled (local, open), false for closed.
  bool decide_without_redis(const limit::limit_request& req, limit::decision& out) {
    switch (store_.o_.on_failure) {
      case fail_mode::local:
        counters.decisions[static_cast<std::size_t>(store_source::local)].add();
        store_.fallback_->try_decide(req, out);
        return true;
      case fail_mode::open:
        // Admitted, and no limit is told: nothing false reaches the headers.
        counters.decisions[static_cast<std::size_t>(store_source::open)].add();
        out = limit::decision{};
        out.admitted = true;
        return true;
      case fail_mode::closed:
        counters.decisions[static_cast<std::size_t>(store_source::closed)].add();
        return false;
    }
    return false;
  }

  /// A call that Redis did not answer usefully: fail_mode decides it now.
  /// Arms the settle timer for `at`, unless it is armed sooner.
  void arm_settle(clock_type::time_point at) {
    if (settle_armed_ && settle_at_ <= at) return;
    settle_armed_ = true;
    settle_at_ = at;
    settle_timer_->expires_at(at);
    settle_timer_->async_wait([this](const boost::system::error_code& ec) {
      if (ec) return;  // re-armed sooner, or shutting down
      settle_armed_ = false;
      settle_due();
    });
  }

  /// Answers by fail_mode every decision of a batch out whose own deadline (its asking plus
  /// store.timeout) has passed, however long the call it rides on has left; arms the timer
  /// for the next one due.
  void settle_due() {
    const auto now = clock_type::now();
    auto next = clock_type::time_point::max();
    // A copy: completing a decision may start others, which may send and finish batches.
    const auto batches = out_;
    for (const auto& b : batches) {
      for (std::size_t i = 0; i < b->items.size(); ++i) {
        if (b->settled[i]) continue;
        if (b->items[i].deadline > now) {
          next = std::min(next, b->items[i].deadline);
          continue;
        }
        if (!b->timeout_counted) {
          b->timeout_counted = true;
          count_failure(redis::failure::timeout);
        }
        b->settled[i] = 1;
        finish_without_redis(b->items[i]);
      }
    }
    if (next != clock_type::time_point::max()) arm_settle(next);
  }

  void finish_without_redis(redis::pending_call& c) {
    const bool decided = decide_without_redis(*c.req, *c.out);
    std::move(c.done)(decided ? boost::system::error_code{} : unavailable);
  }

  void count_failure(redis::failure why) {
    store_error e = store_error::io;
    if (why == redis::failure::timeout) e = store_error::timeout;
    if (why == redis::failure::overload) e = store_error::overload;
    counters.errors[static_cast<std::size_t>(e)].add();
  }

  void count_error_reply(node& from, const redisReply& reply) {
    const std::string_view text(reply.str, reply.len);
    const std::string_view kind = redis::error_kind(text);
    counters
        .errors[static_cast<std::size_t>(kind == "oom" ? store_error::oom : store_error::script)]
        .add();
    if (kind == "noscript") from.link->reload_script();
    if (kind == "clusterdown" || kind == "redirect") refresh_slot_map();
    log_error(text);
  }

  /// Error replies are logged at most once a second per worker.
  void log_error(std::string_view text) {
    const auto now = clock_type::now();
    if (now - last_error_log_ < std::chrono::seconds(1)) return;
    last_error_log_ = now;
    spdlog::error("store: redis answered a decision with an error: {}", text);
  }

  redis_store& store_;
  std::uint32_t index_;
  boost::asio::io_context* io_ = nullptr;             ///< this worker's
  std::vector<std::unique_ptr<node>> nodes_;          ///< servers, by index
  std::vector<std::uint16_t> slots_;                  ///< Cluster: slot -> node index
  bool map_known_ = false;                            ///< Cluster: slots_ came from CLUSTER SLOTS
  clock_type::time_point map_asked_{};                ///< when the map was last asked for
  over_limit_cache cache_;                            ///< keys Redis found over a limit
  redis::command_args args_;                          ///< the call being built
  std::vector<redis::batch_entry> entries_;           ///< ... its requests
  std::vector<redis::pending_call> waiting_;          ///< decisions for the next batch
  bool flush_posted_ = false;                         ///< send_batches is on its way
  std::size_t batches_out_ = 0;                       ///< batch calls waiting for their replies
  std::vector<std::shared_ptr<batch_decision>> out_;  ///< those batches (settle_due's)
  std::optional<boost::asio::steady_timer> settle_timer_;  ///< the next decision due
  clock_type::time_point settle_at_;                       ///< when it is armed for
  bool settle_armed_ = false;                              ///< whether it is
  std::string command_;                                    ///< ... and formatted
  std::string key_;                                        ///< a key being named (its slot)
  clock_type::time_point last_error_log_{};
};

redis_store::redis_store(redis_options o, std::uint32_t workers,
                         std::unique_ptr<local_store> fallback)
    : o_(std::move(o)), fallback_(std::move(fallback)) {
  if (o_.nodes.empty()) throw std::runtime_error("store: no redis address");
  if (!o_.tls_ca.empty()) {
    tls_ = std::make_unique<boost::asio::ssl::context>(boost::asio::ssl::context::tls_client);
    boost::system::error_code ec;
    tls_->load_verify_file(o_.tls_ca, ec);
    if (ec) throw std::runtime_error("store.tls.ca: " + o_.tls_ca + ": " + ec.message());
    if (!o_.tls_certificate.empty()) {
      tls_->use_certificate_chain_file(o_.tls_certificate, ec);
      if (ec) {
        throw std::runtime_error("store.tls.certificate: " + o_.tls_certificate + ": " +
                                 ec.message());
      }
      tls_->use_private_key_file(o_.tls_private_key, boost::asio::ssl::context::pem, ec);
      if (ec) {
        throw std::runtime_error("store.tls.private_key: " + o_.tls_private_key + ": " +
                                 ec.message());
      }
    }
  }
  for (std::uint32_t i = 0; i < std::max(1u, workers); ++i) {
    workers_.push_back(std::make_unique<worker_side>(*this, i));
  }
}

redis_store::~redis_store() = default;

void redis_store::attach(std::uint32_t index, boost::asio::io_context& io) {
  if (index < workers_.size()) workers_[index]->attach(io);
}

bool redis_store::try_decide(const limit::limit_request& req, limit::decision& out) {
  return workers_[req.home % workers_.size()]->try_decide(req, out);
}

void redis_store::start_decide(const limit::limit_request& req, limit::decision& out,
                               decide_handler done) {
  workers_[req.home % workers_.size()]->start_decide(req, out, std::move(done));
}

std::vector<table_size> redis_store::tracked() const {
  return fallback_->tracked();
}

std::optional<limit_state> redis_store::state_of(const limit::limit_spec& spec, std::uint64_t key) {
  return fallback_->state_of(spec, key);
}

std::size_t redis_store::forget(const core::key_block& block,
                                const core::level_prefixes& prefixes) {
  return fallback_->forget(block, prefixes);
}

bool redis_store::degraded() const noexcept {
  for (const auto& w : workers_) {
    if (!w->ready.load(std::memory_order_relaxed)) return true;
  }
  return false;
}

std::vector<const metrics::store_counters*> redis_store::counters() const {
  std::vector<const metrics::store_counters*> out;
  for (const auto& w : workers_)
    out.push_back(&w->counters);
  return out;
}

}  // namespace tollgate::store
