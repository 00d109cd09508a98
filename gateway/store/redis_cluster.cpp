#include "gateway/store/redis_cluster.hpp"

#include <hiredis/hiredis.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "gateway/store/redis_worker.hpp"

namespace tollgate::store::redis {

namespace {

constexpr std::size_t slot_count = 16384;
/// Redirections followed per call before fail_mode decides.
constexpr std::uint8_t max_redirects = 3;
/// Most Redis servers one worker connects to (Cluster primaries named by slot maps and
/// redirections).
constexpr std::size_t max_nodes = 64;

}  // namespace

/// A decision whose limits live in several Cluster slots: one script call per slot, all sent
/// at once; it completes when the last answers. Owned by its calls (shared), so that it dies
/// with them whatever happens to the connections.
struct split_decision {
  /// One slot's part.
  struct part_state {
    group_mask groups = 0;         ///< the request's groups in this slot
    std::uint16_t slot = 0;        ///< their slot
    std::uint16_t node = no_node;  ///< where the reply came from
    bool answered = false;         ///< a reply came
    script_reply reply;            ///< ... and said this
  };
  const limit::limit_request* req = nullptr;        ///< what is decided
  limit::decision* out = nullptr;                   ///< where the decision goes
  decide_handler done;                              ///< the session waiting for it
  clock_type::time_point sent;                      ///< when the parts were sent
  std::array<part_state, limit::max_groups> parts;  ///< one per slot
  std::uint8_t count = 0;                           ///< parts
  std::uint8_t waiting = 0;                         ///< parts not yet answered or failed
  bool failed = false;                              ///< a part got no usable reply

  split_decision(const limit::limit_request* r, limit::decision* o, decide_handler&& d)
      : req(r), out(o), done(std::move(d)) {}
};

// ---- the slot map ---------------------------------------------------------------------------

slot_map::slot_map(const redis_options& o, node_set& nodes, std::uint32_t index)
    : o_(o), nodes_(nodes), index_(index) {
  if (o.cluster) slots_.assign(slot_count, no_node);
}

node* slot_map::node_for(std::uint16_t slot) {
  const std::uint16_t i = slots_[slot];
  if (i == no_node || !nodes_[i].up) return nullptr;
  return &nodes_[i];
}

void slot_map::refresh() {
  const auto now = clock_type::now();
  if (asked_ != clock_type::time_point{} && now - asked_ < std::chrono::seconds(1)) return;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    node& n = nodes_[i];
    if (!n.up) continue;
    std::string cmd;
    append_command(cmd, {"CLUSTER", "SLOTS"});
    pending_call c;
    c.kind = slots;
    c.deadline = now + o_.connect_timeout;
    if (n.link->call_now(cmd, std::move(c)) == failure::none) {
      asked_ = now;
      return;
    }
  }
}

bool slot_map::read(node& from, const redisReply& r) {
  if (r.type != REDIS_REPLY_ARRAY) {
    spdlog::error("store: CLUSTER SLOTS at {}:{} did not answer a slot map{}", from.host, from.port,
                  r.type == REDIS_REPLY_ERROR ? ": " + std::string(r.str, r.len) : "");
    return false;
  }
  std::vector<std::uint16_t> map(slot_count, no_node);
  for (const slot_range& range : parse_slot_map(r, from.host)) {
    // A map naming more primaries than any real cluster has is not followed past the cap.
    if (nodes_.size() >= max_nodes && nodes_.find(range.host, range.port) == nullptr) continue;
    const node& n = nodes_.at(range.host, range.port);
    for (std::size_t slot = range.first; slot <= range.last; ++slot)
      map[slot] = n.index;
  }
  const std::size_t known =
      slot_count - static_cast<std::size_t>(std::count(map.begin(), map.end(), no_node));
  if (!known_ || map != slots_) {
    spdlog::info("store: worker {} has the cluster slot map from {}:{} ({} of {} slots served)",
                 index_, from.host, from.port, known, slot_count);
  }
  slots_ = std::move(map);
  known_ = true;
  return true;
}

bool slot_map::usable() const {
  if (!known_) return false;
  std::vector<bool> used(nodes_.size(), false);
  for (const std::uint16_t i : slots_) {
    if (i == no_node) return false;
    used[i] = true;
  }
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (used[i] && !nodes_[i].up) return false;
  }
  return true;
}

// ---- sending --------------------------------------------------------------------------------

void cluster_router::start(const limit::limit_request& req, limit::decision& out,
                           decide_handler&& done) {
  // The request's groups by slot. Address keys share their network's tag, so they are one
  // part; a global or key limit is a part of its own unless it shares a slot.
  split_decision::part_state parts[limit::max_groups];
  std::uint8_t count = 0;
  std::uint16_t address_slot = no_node;
  for (std::uint8_t g = 0; g < req.group_count; ++g) {
    std::uint16_t slot;
    if (req.groups[g].spec->source == limit::key_source::address && address_slot != no_node) {
      slot = address_slot;
    } else {
      key_.clear();
      append_key(key_, w_.o.key_prefix, req, g);
      slot = key_slot(key_);
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
    send_whole(pending_call(&req, &out, std::move(done)), parts[0].slot, true);
    return;
  }
  auto split = std::make_shared<split_decision>(&req, &out, std::move(done));
  split->sent = clock_type::now();
  split->count = count;
  split->waiting = count;
  const auto deadline = split->sent + w_.o.timeout;
  for (std::uint8_t p = 0; p < count; ++p) {
    split->parts[p].groups = parts[p].groups;
    split->parts[p].slot = parts[p].slot;
  }
  for (std::uint8_t p = 0; p < count; ++p) {
    pending_call c;
    c.part = p;
    c.context = split;
    c.deadline = deadline;
    if (!send_part(split, std::move(c))) --split->waiting;
  }
  // Every part refused at once: completed later (this function has not returned).
  if (split->waiting == 0) finish_split(*split, true);
}

/// Sends a whole decision to the node of `slot` (or the given node), or decides it by
/// fail_mode when it cannot be sent. `initiating`: called from start (complete later).
void cluster_router::send_whole(pending_call&& c, std::uint16_t slot, bool initiating, node* to) {
  if (to == nullptr) to = w_.slots.node_for(slot);
  failure why = failure::io;
  if (to != nullptr) {
    build_call(args_, "EVALSHA", gcra_sha(), w_.o.key_prefix, *c.req);
    command_.clear();
    if (append_command(command_, args_)) {
      c.kind = whole;
      why = to->link->call(command_, std::move(c));
      if (why == failure::none) return;
    }
  }
  w_.fail.count(why);
  if (initiating) {
    w_.fail.finish_later(c);
  } else {
    w_.fail.finish(c);
  }
}

/// Sends part c.part of `split` to the node of its slot (or the given node); false (and the
/// split failed) when it cannot be sent.
bool cluster_router::send_part(const std::shared_ptr<split_decision>& split, pending_call&& c,
                               node* to) {
  const auto& p = split->parts[c.part];
  if (to == nullptr) to = w_.slots.node_for(p.slot);
  failure why = failure::io;
  if (to != nullptr) {
    build_call(args_, "EVALSHA", gcra_sha(), w_.o.key_prefix, *split->req, {}, p.groups);
    command_.clear();
    if (append_command(command_, args_)) {
      c.kind = part;
      why = to->link->call(command_, std::move(c));
      if (why == failure::none) return true;
    }
  }
  w_.fail.count(why);
  split->failed = true;
  return false;
}

/// Gives back, on `to`, what a part committed for the groups `groups` of `req` (its reply `r`).
void cluster_router::send_refund(const limit::limit_request& req, node& to, group_mask groups,
                                 const script_reply& r) {
  if (!to.up) return;  // the connection is gone: the charge drains by itself (c·T at most)
  command_args args;
  build_refund(args, w_.o.key_prefix, req, groups, r);
  std::string cmd;
  if (!append_command(cmd, args)) return;
  pending_call c;
  c.kind = refund;
  c.deadline = clock_type::now() + w_.o.connect_timeout;
  to.link->call_now(cmd, std::move(c));
}

// ---- replies --------------------------------------------------------------------------------

/// An error reply that redirects: the node to ask, after updating the slot map (MOVED).
/// nullptr when `reply` is no redirection or it cannot be followed.
node* cluster_router::follow(const redisReply& reply, pending_call& c) {
  const auto r = parse_redirect(std::string_view(reply.str, reply.len));
  if (!r) return nullptr;
  w_.counters.errors[static_cast<std::size_t>(metrics::store_error::redirect)].add();
  if (c.redirects >= max_redirects) return nullptr;
  if (w_.nodes.size() >= max_nodes && w_.nodes.find(r->host, r->port) == nullptr) return nullptr;
  node& to = w_.nodes.at(r->host, r->port);
  if (!r->ask) {
    w_.slots.moved(r->slot, to.index);
    w_.slots.refresh();
  }
  if (!to.up) return nullptr;
  if (r->ask) {
    // ASKING, then the call itself, on the same connection, one after the other.
    std::string cmd;
    append_command(cmd, {"ASKING"});
    pending_call a;
    a.kind = asking;
    a.deadline = c.deadline;
    if (to.link->call_now(cmd, std::move(a)) != failure::none) return nullptr;
  }
  ++c.redirects;
  return &to;
}

void cluster_router::on_whole(node& from, pending_call& c, const redisReply* reply, failure why) {
  if (reply == nullptr) {
    w_.fail.count(why);
    return w_.fail.finish(c);
  }
  if (reply->type == REDIS_REPLY_ERROR) {
    if (node* to = follow(*reply, c)) return send_whole(std::move(c), 0, false, to);
    w_.count_error_reply(from, *reply);
    return w_.fail.finish(c);
  }
  if (!decode_decision(*reply, *c.req, *c.out)) {
    w_.fail.count_malformed();
    return w_.fail.finish(c);
  }
  w_.answered(*c.req, *c.out, std::chrono::duration<double>(clock_type::now() - c.sent).count());
  std::move(c.done)(boost::system::error_code{});
}

void cluster_router::on_part(node& from, pending_call& c, const redisReply* reply, failure why) {
  auto split = std::static_pointer_cast<split_decision>(c.context);
  auto& p = split->parts[c.part];
  if (reply == nullptr) {
    w_.fail.count(why);
    split->failed = true;
  } else if (reply->type == REDIS_REPLY_ERROR) {
    node* to = follow(*reply, c);
    if (to != nullptr && send_part(split, std::move(c), to)) return;
    if (to == nullptr) w_.count_error_reply(from, *reply);
    split->failed = true;
  } else if (!read_reply(*reply, *split->req, p.groups, p.reply)) {
    w_.fail.count_malformed();
    split->failed = true;
  } else {
    p.answered = true;
    p.node = from.index;
  }
  if (--split->waiting == 0) finish_split(*split, false);
}

void cluster_router::on_refund(const redisReply* reply, failure why) {
  if (reply == nullptr) {
    w_.fail.count(why);
  } else if (reply->type == REDIS_REPLY_ERROR) {
    w_.fail.count_error("script", std::string_view(reply->str, reply->len));
  }
}

/// Every part of `s` answered or failed: the decision, and refunds of what parts committed
/// that the whole request must not keep (docs/design.md §11: never over-admit).
void cluster_router::finish_split(split_decision& s, bool initiating) {
  const limit::limit_request& req = *s.req;
  // The request's verdict over every part; shadowed limits decide nothing.
  bool admitted = !s.failed, shadow_ok = true;
  script_reply all;
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
    if (give_back != 0) send_refund(req, w_.nodes[p.node], give_back, p.reply);
  }
  boost::system::error_code ec;
  if (s.failed) {
    if (!w_.fail.decide(req, *s.out)) ec = unavailable;
  } else {
    redis::assemble(req, all, admitted, !shadow_ok, *s.out);
    w_.answered(req, *s.out, std::chrono::duration<double>(clock_type::now() - s.sent).count());
  }
  if (initiating) {
    complete_later(std::move(s.done), ec);
  } else {
    std::move(s.done)(ec);
  }
}

}  // namespace tollgate::store::redis
