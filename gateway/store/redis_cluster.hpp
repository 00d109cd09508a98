#pragma once
/// Redis Cluster (docs/design.md §11) for one worker: the slot map, a decision routed to the node
/// of its slot (or split in one call per slot, with refunds of what a part committed that the whole
/// request must not keep), and MOVED and ASK redirections. Internal to store/.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gateway/store/redis_nodes.hpp"
#include "gateway/store/redis_store.hpp"
#include "gateway/store/redis_wire.hpp"

namespace tollgate::store::redis {

struct worker_context;
struct split_decision;

/// Which node serves each of the 16384 slots, as CLUSTER SLOTS and MOVED said.
/// Thread safety: the worker's thread only.
class slot_map {
 public:
  /// The map of worker `index`'s `nodes` (empty unless `o.cluster`).
  slot_map(const redis_options& o, node_set& nodes, std::uint32_t index);

  /// The usable node serving `slot`, or nullptr when none is known or usable.
  node* node_for(std::uint16_t slot);
  /// `slot` is now served by node `n` (a MOVED redirection).
  void moved(std::uint16_t slot, std::uint16_t n) { slots_[slot] = n; }
  /// Asks a usable node for the slot map, at most once a second.
  void refresh();
  /// Reads a CLUSTER SLOTS reply from `from`: false when it is no map.
  bool read(node& from, const redisReply& r);
  /// Whether the map is known, and every node it names is up.
  bool usable() const;

 private:
  const redis_options& o_;                       ///< settings
  node_set& nodes_;                              ///< the worker's
  std::uint32_t index_;                          ///< the worker's, for logs
  std::vector<std::uint16_t> slots_;             ///< slot -> node index
  bool known_ = false;                           ///< slots_ came from CLUSTER SLOTS
  std::chrono::steady_clock::time_point asked_;  ///< when the map was last asked for
};

/// Decides requests on a Cluster: a request's limits by slot, one script call for each slot.
/// Thread safety: the worker's thread only.
class cluster_router {
 public:
  /// The router of the worker whose parts share `w`.
  explicit cluster_router(worker_context& w) : w_(w) {}

  /// Sends the decision of `req` into `out`, completing `done` once the nodes answered (or
  /// fail_mode, when they cannot).
  void start(const limit::limit_request& req, limit::decision& out, decide_handler&& done);

  /// The reply to a whole decision (nullptr: none came, `why`).
  void on_whole(node& from, pending_call& c, const redisReply* reply, failure why);
  /// The reply to a part of a split decision.
  void on_part(node& from, pending_call& c, const redisReply* reply, failure why);
  /// The reply to a refund.
  void on_refund(const redisReply* reply, failure why);

 private:
  /// Sends a whole decision to the node of `slot` (or `to`); fail_mode when it cannot.
  void send_whole(pending_call&& c, std::uint16_t slot, bool initiating, node* to = nullptr);
  /// Sends part c.part of `split`; false when it cannot be sent.
  bool send_part(const std::shared_ptr<split_decision>& split, pending_call&& c,
                 node* to = nullptr);
  /// The node a redirection says to ask (nullptr: none, or not followed).
  node* follow(const redisReply& reply, pending_call& c);
  /// Every part answered or failed: the decision, and refunds.
  void finish_split(split_decision& s, bool initiating);
  /// Gives back on `to` what a part committed for `groups`.
  void send_refund(const limit::limit_request& req, node& to, group_mask groups,
                   const script_reply& r);

  worker_context& w_;    ///< what the worker's parts share
  command_args args_;    ///< the call being built
  std::string command_;  ///< ... and formatted
  std::string key_;      ///< a key being named (its slot)
};

}  // namespace tollgate::store::redis
