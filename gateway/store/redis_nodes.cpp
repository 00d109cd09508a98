#include "gateway/store/redis_nodes.hpp"

namespace tollgate::store::redis {

void node_set::attach(boost::asio::io_context& io) {
  io_ = &io;
  for (auto& n : nodes_)
    connect(*n);
}

node& node_set::add(const std::string& host, std::uint16_t port) {
  nodes_.push_back(
      std::make_unique<node>(owner_, static_cast<std::uint16_t>(nodes_.size()), host, port));
  return *nodes_.back();
}

node* node_set::find(const std::string& host, std::uint16_t port) {
  for (auto& n : nodes_) {
    if (n->host == host && n->port == port) return n.get();
  }
  return nullptr;
}

node& node_set::at(const std::string& host, std::uint16_t port) {
  if (node* n = find(host, port)) return *n;
  node& n = add(host, port);
  if (io_ != nullptr) connect(n);
  return n;
}

void node_set::connect(node& n) {
  link_options o = common_;
  o.host = n.host;
  o.port = n.port;
  // Owned by its own coroutine on the io_context (so that it dies with it, before the
  // store); the node only points at it.
  auto l = link::make(*io_, std::move(o), n);
  n.link = l.get();
  l->start();
}

}  // namespace tollgate::store::redis
