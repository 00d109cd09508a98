#pragma once
/// The access log's lines (docs/design.md §9): one per request, and one when a WebSocket tunnel
/// ends, as text or as one JSON object a line for log shippers. Formatting only: where lines go is
/// core::log_file's business.

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace tollgate::net {

/// One request as the access log tells it.
struct access_entry {
  std::string_view client;         ///< the address it was charged to
  std::string_view method;         ///< as sent
  std::string_view target;         ///< as sent (path and query)
  unsigned version = 11;           ///< HTTP version: 10, 11, or 20 (HTTP/2)
  unsigned status = 0;             ///< of the response; 0: none was sent (the client left)
  std::string_view category;       ///< its category
  std::string_view decision;       ///< the label of tollgate_requests_total
  std::string_view limit;          ///< the binding limit ("name.tier"), or "" for none
  std::string_view consumer_tier;  ///< its consumer tier (docs/design.md §15), or "" for none
  std::string_view step;  ///< its client's penalty ladder step (docs/design.md §16), or "" for none
  std::string_view upstream;     ///< where it went, or "" when answered by the gateway
  double upstream_seconds = -1;  ///< sending it upstream to the response head; < 0: not sent
  std::uint64_t bytes = 0;       ///< sent to the client for it, head included
  double seconds = 0;            ///< from its head to the end of its response
};

/// One WebSocket tunnel at its end.
struct tunnel_entry {
  std::string_view client;          ///< as in access_entry
  std::string_view method;          ///< of the upgrade request
  std::string_view target;          ///< of the upgrade request
  std::string_view category;        ///< its category
  std::uint16_t code = 0;           ///< the close code (1006: none)
  std::string_view by;              ///< who closed first: client, upstream or gateway
  std::uint64_t from_client = 0;    ///< messages relayed from the client
  std::uint64_t from_upstream = 0;  ///< messages relayed from the upstream
  double seconds = 0;               ///< the tunnel's life
};

/// Appends the line of `e` at `now`, with its newline:
///   text: `2026-11-23T09:24:23.123456Z access 192.0.2.7 "GET /a?b=1 HTTP/1.1" 200
///          category=general decision=allowed limit=- upstream=app upstream_time=0.000812
///          bytes=245 0.001s` (one line)
///   json: `{"time":"...","type":"access","client":"192.0.2.7","method":"GET","path":"/a?b=1",
///          "protocol":"HTTP/1.1","status":200,...,"upstream_time":0.000812,"bytes":245,
///          "duration":0.001}` (absent values are null)
/// Bytes a client sent that are not printable ASCII are escaped, so a line is always one line
/// and, in json, always valid JSON.
void append_access_line(std::string& out, bool json, std::chrono::system_clock::time_point now,
                        const access_entry& e);

/// Appends the line of a tunnel's end, in the same two formats ("type":"websocket_closed").
void append_tunnel_line(std::string& out, bool json, std::chrono::system_clock::time_point now,
                        const tunnel_entry& e);

}  // namespace tollgate::net
