#include "gateway/net/reading.hpp"

#include <array>
#include <cstring>

#include <spdlog/spdlog.h>

#include "gateway/net/heads.hpp"
#include "gateway/net/stream_io.hpp"
#include "gateway/protocol/proxy_header.hpp"

namespace tollgate::net {

namespace {

/// How long a connection waits for its next request with its scratch before giving it back.
constexpr std::chrono::milliseconds idle_release{1000};

}  // namespace

task<bool> await_request(worker& w, deadline_watch& watch, std::unique_ptr<connection_scratch>& sc,
                         std::chrono::nanoseconds idle, bool between) {
  if (sc->buffer.size() > 0) co_return true;  // pipelined: the next request is already here
  watch.client_for(idle);
  // In the idle list for as long as this waits, however it ends.
  struct idle_member {
    idle_connections& list;
    deadline_watch& watch;
    ~idle_member() { list.erase(watch); }
  } const member{w.idle, watch};
  if (between) w.idle.push(watch);
  error_code ec;
  std::size_t n = 0;
  if (watch.stream.tls()) {
    // TLS records are read whole by the TLS layer, which keeps its own buffers: the scratch
    // stays with the connection.
    std::tie(ec, n) = co_await watch.stream.tls_read_some(sc->buffer.prepare(4096));
    if (ec) co_return false;
    sc->buffer.commit(n);
    co_return true;
  }
  if (w.scratch.in_use() <= scratch_pool::max_kept_waiting) {
    // The ordinary read, into the scratch: the next request of a busy connection comes within
    // microseconds, and this costs no more system calls than Asio's own read (none before
    // the socket is readable, when the last read drained it). A connection still idle after
    // `idle_release` is woken by its watchdog (a cancel, no system call) and then waits
    // without its scratch. Past max_kept_waiting blocks in use, a waiting connection
    // gives it back at once instead (below), so that memory stays bounded whatever the rate
    // of new connections.
    watch.release_after(idle_release);
    std::tie(ec, n) = co_await watch.client.async_read_some(sc->buffer.prepare(4096), use_tuple);
    const bool released = watch.released;
    watch.release_after(std::chrono::nanoseconds::max());
    if (ec != asio::error::operation_aborted || !released || !watch.client.is_open()) {
      if (ec) co_return false;
      sc->buffer.commit(n);
      co_return true;
    }
  } else {
    // A read tried at once before the scratch goes back: the request may be here already.
    n = watch.client.read_some(sc->buffer.prepare(4096), ec);
    if (ec != asio::error::would_block && ec != asio::error::try_again) {
      if (ec) co_return false;
      sc->buffer.commit(n);
      co_return true;
    }
  }
  w.scratch.give(std::move(sc));
  for (;;) {
    // Asio re-arms the socket for a wait (a system call), so bytes that came in meanwhile
    // are not missed.
    std::tie(ec) = co_await watch.client.async_wait(tcp::socket::wait_read, use_tuple);
    if (ec) break;
    // Readable: the read completes at once (an awaited one would cost another trip through
    // the scheduler). Nothing after all (a spurious wake-up): wait again.
    if (sc == nullptr) sc = w.scratch.take();
    n = watch.client.read_some(sc->buffer.prepare(4096), ec);
    if (ec != asio::error::would_block && ec != asio::error::try_again) break;
  }
  if (ec) co_return false;
  sc->buffer.commit(n);
  co_return true;
}

namespace {

/// Reads the PROXY protocol header that starts the connection within `timeout`, leaving the
/// bytes after it in `buffer`, and replaces `peer` with the client it names (LOCAL and UNKNOWN
/// leave the peer). False when the connection ended or did not start with a valid header: it
/// is then closed without an answer, since its bytes cannot be trusted to be HTTP.
task<bool> read_proxy_header(deadline_watch& watch, beast::flat_buffer& buffer,
                             std::chrono::nanoseconds timeout, core::address& peer) {
  watch.client_for(timeout);  // one deadline for the whole header
  for (;;) {
    const auto data = buffer.cdata();
    protocol::proxy_header header;
    switch (protocol::parse_proxy_header({static_cast<const char*>(data.data()), data.size()},
                                         header)) {
      case protocol::proxy_parse::done:
        buffer.consume(header.length);
        if (header.source) peer = *header.source;
        co_return true;
      case protocol::proxy_parse::invalid:
        spdlog::debug("closing a connection from {}: no valid PROXY protocol header",
                      peer.to_string());
        co_return false;
      case protocol::proxy_parse::need_more:
        break;
    }
    auto [ec, n] = co_await watch.client.async_read_some(
        buffer.prepare(protocol::max_proxy_header - buffer.size()), use_tuple);
    if (ec) co_return false;
    buffer.commit(n);
  }
}

/// Reads the rest of a request head that parse_head_buffered found incomplete, within
/// `timeout`: on TLS connections, whose heads collect_slow_head does not collect.
task<error_code> read_request_head(deadline_watch& watch, beast::flat_buffer& buffer,
                                   request_parser& parser, std::uint64_t head, std::uint64_t limit,
                                   std::chrono::nanoseconds timeout) {
  watch.client_for(timeout);
  for (;;) {
    if (error_code ec = co_await read_more(watch.stream, buffer, parser)) co_return ec;
    error_code ec;
    if (parse_head_buffered(parser, buffer, head, limit, ec) || ec) co_return ec;
  }
}

/// Appends what the socket has now to `out`, read into a block on the thread's stack (not a
/// coroutine frame). False when nothing was there; errors other than "would block" in `ec`.
bool append_available(tcp_socket& s, std::string& out, error_code& ec) {
  std::array<char, 4096> block;
  const std::size_t n = s.read_some(asio::buffer(block), ec);
  if (ec == asio::error::would_block || ec == asio::error::try_again) {
    ec = {};
    return false;
  }
  if (ec) return false;
  out.append(block.data(), n);
  return true;
}

constexpr std::string_view end_of_head = "\r\n\r\n";

/// Whether the scratch holds a whole request head already (or more than `limit` bytes of one,
/// which the parser then refuses), as it almost always does after the first read. TLS heads
/// count as whole: their reads go through OpenSSL's buffers, which it keeps anyway.
bool head_in_hand(const deadline_watch& watch, const connection_scratch& sc, std::uint64_t limit) {
  return watch.stream.tls() || sc.buffer.size() > limit ||
         view_of(sc.buffer).find(end_of_head) != std::string_view::npos;
}

/// Starts the request in hand: a fresh parser under the configuration in force now (which
/// serves the whole request); the fields of the previous request and response are gone.
void begin_request(worker& w, connection_scratch& sc) {
  request_in_hand& r = sc.request;
  r.parser.reset();
  sc.arena.reset();
  r.snap = w.current;
  r.adm.route = nullptr;  // not admitted yet: a head refused now is not counted by category
  const auto& limits = r.snap->config.limits;
  std::apply([&](auto&&... a) { r.parser.emplace(a...); }, on_arena(sc.arena));
  r.parser->header_limit(static_cast<std::uint32_t>(limits.max_header_bytes));
  r.parser->body_limit(limits.max_request_body);
}

/// Collects a request head that did not come whole with its first bytes, within `timeout`, in
/// a string sized to what arrived, the scratch given back to the worker meanwhile: a client
/// sending its head slowly holds its bytes, not a scratch block. False when the connection
/// ended or the head ran out of time.
task<bool> collect_slow_head(worker& w, deadline_watch& watch,
                             std::unique_ptr<connection_scratch>& sc, std::uint64_t limit,
                             std::chrono::nanoseconds timeout) {
  std::string partial(view_of(sc->buffer));
  // A head already malformed is refused now (the caller parses it again), not when it ends.
  begin_request(w, *sc);
  error_code ec;
  sc->request.parser->put(asio::buffer(partial), ec);
  if (ec && ec != http::error::need_more) co_return true;
  sc->buffer.consume(sc->buffer.size());
  w.scratch.give(std::move(sc));
  watch.client_for(timeout);
  for (;;) {
    std::tie(ec) = co_await watch.client.async_wait(tcp::socket::wait_read, use_tuple);
    if (ec) co_return false;
    const std::size_t searched = partial.size() < 3 ? 0 : partial.size() - 3;
    if (!append_available(watch.client, partial, ec)) {
      if (ec) co_return false;  // the client left (or reset) mid-head
      continue;                 // woken for nothing: wait again
    }
    if (partial.size() > limit || partial.find(end_of_head, searched) != std::string::npos) break;
  }
  sc = w.scratch.take();
  const auto space = sc->buffer.prepare(partial.size());
  std::memcpy(space.data(), partial.data(), partial.size());
  sc->buffer.commit(partial.size());
  co_return true;
}

}  // namespace

task<bool> open_connection(worker& w, deadline_watch& watch, connection_scratch& sc,
                           core::address& peer, const listener_info& l, client_places& places,
                           std::shared_ptr<asio::ssl::context>& tls_context) {
  const auto header_timeout = w.current->config.limits.header_timeout;
  if (l.proxy_protocol) {
    if (!co_await read_proxy_header(watch, sc.buffer, header_timeout, peer)) co_return false;
    // The client is known now: its places under the connection caps.
    if (const auto full = take_places(w, peer, places)) {
      refuse(w, watch.client, l, *full, peer);
      co_return false;
    }
  }
  if (!l.tls) co_return true;
  // TLS begins after the PROXY header; the handshake shares the header's timeout. The context
  // is this listener's (by name: listeners change at restart only) in the current snapshot, so
  // a reload's renewed certificate serves new connections; held for the connection's life.
  tls_context = w.current->tls_context(l.name);
  if (tls_context == nullptr) {
    spdlog::error("listener {}: no TLS settings in the configuration in force", l.name);
    co_return false;
  }
  watch.client_for(header_timeout);
  if (const error_code ec = co_await watch.stream.handshake(*tls_context, sc.buffer)) {
    spdlog::debug("TLS handshake with {} failed: {}", peer.to_string(), ec.message());
    co_return false;
  }
  if (const core::client_certificate* cert = watch.stream.certificate()) {
    // The fields that forward it upstream, rendered once for the connection's requests.
    for (const auto& listener : w.current->config.listeners) {
      if (listener.name == l.name && listener.tls) {
        watch.stream.set_certificate_fields(certificate_lines(listener.tls->headers, *cert));
      }
    }
  }
  co_return true;
}

task<bool> read_request(worker& w, deadline_watch& watch, std::unique_ptr<connection_scratch>& sc,
                        bool first, error_code& rec) {
  const auto& idle_limits = w.current->config.limits;
  const auto idle = first ? idle_limits.header_timeout : idle_limits.keepalive_timeout;
  if (!co_await await_request(w, watch, sc, idle, !first)) co_return false;
  // Read again after each wait: a reload meanwhile may have freed the configuration before.
  const auto& head_limits = w.current->config.limits;
  if (!head_in_hand(watch, *sc, head_limits.max_header_bytes) &&
      !co_await collect_slow_head(w, watch, sc, head_limits.max_header_bytes,
                                  head_limits.header_timeout)) {
    co_return false;
  }
  begin_request(w, *sc);
  request_in_hand& r = sc->request;
  const auto& limits = r.snap->config.limits;
  // Usually the whole head came with the first read: parsed without another await.
  std::uint64_t head_bytes = 0;
  rec = {};
  if (!parse_head_buffered(*r.parser, sc->buffer, head_bytes, limits.max_header_bytes, rec) &&
      !rec) {
    rec = co_await read_request_head(watch, sc->buffer, *r.parser, head_bytes,
                                     limits.max_header_bytes, limits.header_timeout);
  }
  co_return true;
}

}  // namespace tollgate::net
