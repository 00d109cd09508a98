#pragma once
/// One client connection's life: its coroutine, from the first byte to the close (session.cpp).
/// Internal to net/: the server spawns one per accepted connection.

#include "gateway/net/worker.hpp"

namespace tollgate::net {

/// Serves one client connection from `peer` until it closes, holding `places` (under the
/// connection caps; taken by the session itself on PROXY protocol listeners, where the client
/// is known only from the header); never throws for network errors.
task<void> run_session(worker& w, tcp_socket socket, const listener_info& l, core::address peer,
                       client_places places);

}  // namespace tollgate::net
