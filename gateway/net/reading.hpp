#pragma once
/// Reading what a client sends, phase by phase: the PROXY protocol header and the TLS
/// handshake that open a connection, then each request's head, read into a fresh parser with
/// the connection's scratch given back while the client idles or trickles. Internal to net/.

#include <memory>

#include "gateway/net/scratch.hpp"
#include "gateway/net/worker.hpp"

namespace tollgate::net {

/// Phase 1, once per connection: the PROXY protocol header (and with it the client's place
/// under the per-address cap), then the TLS handshake. False when the connection is to close.
task<bool> open_connection(worker& w, deadline_watch& watch, connection_scratch& sc,
                           core::address& peer, const listener_info& l, client_places& places,
                           std::shared_ptr<asio::ssl::context>& tls_context);

/// Waits for the first bytes of the next request within `idle` and reads them into the
/// connection's scratch, so that the header timeout bounds the head itself, not the pause
/// before it. Between requests (`between` true) the connection stands in the worker's idle
/// list, the first closed when the worker is full. A connection that waits longer than a
/// second, or at once when its worker has many blocks in use, waits without its scratch (`sc`
/// is null meanwhile and holds a block again when this returns true). False when the
/// connection ended.
task<bool> await_request(worker& w, deadline_watch& watch, std::unique_ptr<connection_scratch>& sc,
                         std::chrono::nanoseconds idle, bool between);

/// Phase 2: waits for the next request (`first`: the connection's first) and reads its head
/// into a fresh parser. False when the connection ended; otherwise `rec` says how reading the
/// head went (an error is answered by phase 3).
task<bool> read_request(worker& w, deadline_watch& watch, std::unique_ptr<connection_scratch>& sc,
                        bool first, error_code& rec);

}  // namespace tollgate::net
