#pragma once
/// The WebSocket tunnel (docs/design.md §6): once the upstream has answered an admitted upgrade
/// with 101, frames are relayed both ways until either side closes. Frames from the client are
/// parsed enough to enforce the category's message limits (policy/websocket.hpp) and relayed
/// verbatim, still masked; frames from the upstream are relayed as they come, their headers
/// read only to find where a close frame of the gateway's own may go. A relay of our own
/// rather than beast::websocket::stream, which would unmask, reassemble and mask again every
/// message (bench/README.md, "WebSocket", has the figures of the verbatim relay). Ownership
/// moves as in Beast's chat-multi example: the session's parser and scratch end at the 101,
/// the tunnel takes the sockets and the bytes read past each head. Internal to net/.

#include <memory>
#include <optional>
#include <string>

#include "gateway/limit/inflight.hpp"
#include "gateway/net/address_slots.hpp"
#include "gateway/net/scratch.hpp"
#include "gateway/net/stream_io.hpp"
#include "gateway/net/upstream_pool.hpp"

namespace tollgate::net {

struct worker;

/// Whether the request `parser` read asks for a WebSocket (RFC 6455 §4.2.1): GET over
/// HTTP/1.1 with `Upgrade: websocket` and `Connection: upgrade`.
bool is_websocket_upgrade(const request_parser& parser);

/// The key the open WebSockets of a client are counted under in a category (its individual
/// address key: /32 or /64).
std::uint64_t tunnel_key(const policy::client_subjects& who, std::size_t category) noexcept;

/// What a tunnel starts with, once the 101 has gone to the client.
struct tunnel_setup {
  std::unique_ptr<upstream_connection> upstream;  ///< upgraded; its buffer already emptied
  std::string from_client;    ///< client bytes read past the upgrade request (early frames)
  std::string from_upstream;  ///< upstream bytes read past the 101
  /// The category's options when the upgrade came (a reload applies to new tunnels only).
  protocol::ws::message_limits limits;
  std::chrono::nanoseconds idle_timeout{0};  ///< idle_timeout
  std::chrono::nanoseconds max_lifetime{0};  ///< max_lifetime
  std::uint16_t metric = 0;                  ///< the category's label index
  bool extensions = false;                   ///< the 101 negotiated an extension (RSV bits allowed)
  address_slot place;              ///< the connection's place under max_connections_per_address
  limit::inflight_holds inflight;  ///< its places under concurrency limits, until it closes
  /// With the access log on: what the line logged when the tunnel ends repeats of its
  /// upgrade request.
  struct log_fields {
    std::string client, method, target, category;
    bool json = false;  ///< logging.format json
  };
  std::optional<log_fields> log;  ///< empty: the access log is off
};

/// The tunnels of one worker, so that a stop can close them all (1001) and wait for their
/// close handshakes. Intrusive: joining allocates nothing.
/// Thread safety: none needed; one worker's.
class tunnel_list {
 public:
  struct member {
    member* prev = nullptr;  ///< links in the list
    member* next = nullptr;  ///< see prev
    /// Starts the gateway's close of this tunnel with `code`.
    virtual void close_with(std::uint16_t code) = 0;

   protected:
    ~member() = default;
  };
  void push(member& m) noexcept {
    m.prev = nullptr;
    m.next = head_;
    if (head_ != nullptr) head_->prev = &m;
    head_ = &m;
  }
  void erase(member& m) noexcept {
    (m.prev != nullptr ? m.prev->next : head_) = m.next;
    if (m.next != nullptr) m.next->prev = m.prev;
  }
  /// Starts the close of every tunnel with `code`.
  void close_all(std::uint16_t code) {
    for (member* m = head_; m != nullptr;) {
      member* next = m->next;
      m->close_with(code);
      m = next;
    }
  }

 private:
  member* head_ = nullptr;  ///< newest
};

/// Relays frames between the client of `watch` and `setup.upstream` until both sides have
/// ended, closing with 1001 at the category's max_lifetime and idle_timeout, 1008 or 1009 on
/// the message limits, 1002 on a malformed client frame. The connection ends with it.
task<void> run_tunnel(worker& w, deadline_watch& watch, tunnel_setup setup);

}  // namespace tollgate::net
