#pragma once
/// The request a connection serves and the scratch space it uses, given back to the worker
/// while the connection idles. Internal to net/.

#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/admission/admission.hpp"
#include "gateway/core/sanitizers.hpp"
#include "gateway/net/address_slots.hpp"
#include "gateway/net/asio.hpp"
#include "gateway/net/beast_headers.hpp"
#include "gateway/net/deadline.hpp"
#include "gateway/net/messages.hpp"
#include "gateway/net/snapshot.hpp"
#include "gateway/net/upstream_pool.hpp"

namespace tollgate::net {

/// The request a connection is serving and what became of it: the parser that reads it, the
/// configuration it is served under, and admission's record of it. Kept in the connection's
/// scratch rather than in its coroutine frame, which lives as long as the connection: an idle
/// connection holds none of this.
struct request_in_hand {
  std::optional<request_parser> parser;  ///< reads the request (fields in the scratch's arena)
  std::shared_ptr<const snapshot> snap;  ///< the configuration in force when it started
  beast_headers headers;                 ///< its fields, as admission reads them
  admission::record adm;                 ///< what admission made of it
  core::address peer;                    ///< the connection's peer
  std::string_view peer_text;            ///< the same as text (made once per connection)
  unsigned version = 11;                 ///< its HTTP version
  bool keep_alive = false;               ///< the client asked to keep the connection
  bool has_host = true;                  ///< it has a Host field (HTTP/1.0 may not)
  std::chrono::steady_clock::time_point started;  ///< its head in hand
  std::uint64_t written_before = 0;  ///< client_stream::written when it began (access log)
  double upstream_seconds = -1;      ///< to the upstream's response head; < 0: not sent
};

/// Buffers a connection uses while it carries a request. A connection that stays idle, or
/// sends its head slowly, gives them back to its worker's scratch_pool (see await_request and
/// collect_slow_head in session.cpp).
struct connection_scratch {
  /// Blocks are mapped from the kernel rather than the heap: pages are resident only once
  /// touched (a request without a body never touches `body`), and a block freed after a burst
  /// of connections goes back to the system instead of staying in the heap.
  /// Under AddressSanitizer they come from the heap (core/sanitizers.hpp).
#ifdef TOLLGATE_ASAN
  static void* operator new(std::size_t n) {
    return ::operator new(n);
  }
  static void operator delete(void* p, std::size_t) noexcept {
    ::operator delete(p);
  }
#else
  static void* operator new(std::size_t n) {
    void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    return p;
  }
  static void operator delete(void* p, std::size_t n) noexcept {
    ::munmap(p, n);
  }
#endif

  beast::flat_buffer buffer;         ///< bytes read from the client and not yet parsed
  std::string forwarded_for;         ///< X-Forwarded-For to send upstream
  std::string client_text;           ///< X-Real-IP of the current request when not the peer
  std::array<char, 16 * 1024> body;  ///< one chunk of a body being relayed
  std::string head;                  ///< the head being sent (upstream or client)
  field_arena arena;                 ///< header fields of the current request and response
  std::string problem;               ///< body of an answer to a head that could not be read
  std::string response_fields;       ///< the gateway's lines on an upstream's response
  request_in_hand request;           ///< the request being served
  unsigned status = 0;  ///< status of the response sent for the current request (access log)
  /// A WebSocket upgrade's place under max_connections_per_address, from admission until
  /// its tunnel takes it (or the upgrade fails).
  address_slot tunnel_place;
  /// The upstream connection of an upgrade it answered with 101, for the tunnel.
  std::unique_ptr<upstream_connection> upgraded;
  bool ws_extensions = false;  ///< that 101 negotiated an extension
};

/// Scratch space of one worker's connections: taken when bytes of a request arrive, given back
/// when the connection idles or its head trickles, so memory follows requests in hand rather
/// than open connections. Keeps spares for reuse, up to `max_spare`, and frees those the
/// worker did without for a second (at its next take: a worker that takes none keeps them).
/// Thread safety: none needed; one worker's.
class scratch_pool {
 public:
  /// Most scratch blocks kept for reuse (each about 30-45 KiB mapped, at most some 23 MiB a
  /// worker, resident only as far as touched). HTTP/1.1 connections between requests mostly
  /// keep theirs (await_request); each HTTP/2 stream takes one and gives it back, and a cap
  /// below the streams in flight (400 at `h2load -c4 -m100`) had most streams map and unmap
  /// a block: at 128, a fifth of their CPU went to mmap, munmap and page faults
  /// (bench/http2.sh).
  static constexpr std::size_t max_spare = 512;
  /// Spares kept however long the worker does without them.
  static constexpr std::size_t min_spare = 16;
  /// Most blocks in use before waiting connections give theirs back at once (await_request).
  static constexpr std::size_t max_kept_waiting = 64;
  /// Blocks taken and not given back.
  std::size_t in_use() const noexcept { return in_use_; }
  /// Spares held now.
  std::size_t spare() const noexcept { return spare_.size(); }
  using clock = deadline_watch::clock;
  /// A block with an empty buffer: a spare, or a new one. `now`: the time (for trim).
  std::unique_ptr<connection_scratch> take(clock::time_point now = clock::now()) {
    ++in_use_;
    trim(now);
    taken_at_ = now;
    // Default-initialised, not value-initialised (make_unique would zero all 45 KiB first and
    // so make every page resident): the relay chunk and the arena are written before read.
    if (spare_.empty()) {
      fewest_ = 0;
      return std::unique_ptr<connection_scratch>(new connection_scratch);
    }
    auto s = std::move(spare_.back());
    spare_.pop_back();
    fewest_ = std::min(fewest_, spare_.size());
    return s;
  }
  /// Takes `s` back (its buffer must be empty). The request it held is let go, so that a
  /// spare keeps no configuration alive.
  void give(std::unique_ptr<connection_scratch> s) {
    --in_use_;
    s->request.adm.inflight.release();  // however its request ended
    if (spare_.size() >= max_spare) return;
    s->upgraded.reset();
    s->tunnel_place = {};
    s->request.parser.reset();
    s->arena.reset();  // its parsers are gone: the next user starts with the whole arena
    s->request.snap.reset();
    spare_.push_back(std::move(s));
  }

  /// At most once a second (take calls it): frees the spares that sat unused since the last
  /// trim (the fewest held at any time since; all of them when nothing was taken for a
  /// second), down to min_spare, the coldest first.
  void trim(clock::time_point now) {
    if (now - trimmed_at_ < std::chrono::seconds(1)) return;
    trimmed_at_ = now;
    const std::size_t unused = now - taken_at_ >= std::chrono::seconds(1) ? spare_.size() : fewest_;
    const std::size_t surplus =
        std::min(unused, spare_.size() > min_spare ? spare_.size() - min_spare : 0);
    spare_.erase(spare_.begin(), spare_.begin() + static_cast<std::ptrdiff_t>(surplus));
    fewest_ = spare_.size();
  }

 private:
  std::vector<std::unique_ptr<connection_scratch>> spare_;  ///< ready for reuse
  std::size_t in_use_ = 0;                                  ///< taken, not given back
  std::size_t fewest_ = 0;          ///< fewest spares held since the last trim
  clock::time_point trimmed_at_{};  ///< when spares were last trimmed
  clock::time_point taken_at_{};    ///< when a block was last taken
};

}  // namespace tollgate::net
