#pragma once
/// The Redis servers one worker talks to (docs/design.md §11): the configured server, or the
/// Cluster primaries that slot maps and redirections name, each with its link on the worker's
/// io_context. Internal to store/.

#include <boost/asio/io_context.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gateway/store/redis_link.hpp"

namespace tollgate::store::redis {

class worker;

/// What a call to Redis is (pending_call::kind).
enum call_kind : std::uint8_t {
  batch,   ///< one server: the decisions made in one turn of the event loop, in one call
  whole,   ///< every limit of a request in one script call (one slot)
  part,    ///< the limits of a request in one slot (Cluster, limits in several slots)
  refund,  ///< gives back what a part committed
  slots,   ///< CLUSTER SLOTS
  asking,  ///< ASKING before a call sent where an ASK redirection said
};

/// No node (an unknown slot's).
inline constexpr std::uint16_t no_node = 0xffff;

/// One Redis server a worker talks to, and its link. Its replies and state changes go to the
/// worker (redis_worker.cpp).
struct node final : link_events {
  node(worker& w, std::uint16_t i, std::string h, std::uint16_t p)
      : owner(w), index(i), host(std::move(h)), port(p) {}
  void on_reply(pending_call& c, const redisReply* reply, failure why) override;
  void on_state(bool up, const std::string& why) override;

  worker& owner;                ///< whose node it is
  std::uint16_t index;          ///< in its node_set
  std::string host;             ///< as configured or as Redis named it
  std::uint16_t port;           ///< its port
  redis::link* link = nullptr;  ///< owned by its coroutine on the worker's io_context
  bool up = false;              ///< link ready
};

/// One worker's nodes, by index.
/// Thread safety: the worker's thread only (made before it runs).
class node_set {
 public:
  /// Nodes of `owner`, connected with `common` (its host and port set per node).
  node_set(worker& owner, link_options common) : owner_(owner), common_(std::move(common)) {}

  /// Connects every node through `io`, and later ones as they are made.
  void attach(boost::asio::io_context& io);
  /// A new node at host:port (connected once attached).
  node& add(const std::string& host, std::uint16_t port);
  /// The node at host:port, or nullptr.
  node* find(const std::string& host, std::uint16_t port);
  /// The node at host:port, made (and connected) if new.
  node& at(const std::string& host, std::uint16_t port);

  /// Node `i`.
  node& operator[](std::size_t i) { return *nodes_[i]; }
  const node& operator[](std::size_t i) const { return *nodes_[i]; }
  /// How many.
  std::size_t size() const noexcept { return nodes_.size(); }

 private:
  /// Makes and starts `n`'s link.
  void connect(node& n);

  worker& owner_;                             ///< the nodes' owner
  link_options common_;                       ///< what every link shares
  boost::asio::io_context* io_ = nullptr;     ///< the worker's, once attached
  std::vector<std::unique_ptr<node>> nodes_;  ///< by index
};

}  // namespace tollgate::store::redis
