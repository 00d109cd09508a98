#pragma once
/// A request as admission sees it: its method, target, fields, peer and instant, with no HTTP
/// library's types. The gateway makes one from Beast's parser (net/session.cpp), the
/// simulator from a log line (sim/simulator.cpp), the tests from strings.

#include <cstddef>
#include <string_view>

#include "gateway/core/address.hpp"
#include "gateway/core/client_certificate.hpp"
#include "gateway/core/clock.hpp"
#include "gateway/policy/router.hpp"

namespace tollgate::admission {

/// The header fields of one request, looked up by name (case-insensitive).
class header_source {
 public:
  /// The value of the first field `name`, or "" when there is none.
  virtual std::string_view value(std::string_view name) const = 0;
  /// How many fields `name` there are.
  virtual std::size_t count(std::string_view name) const = 0;
  /// Calls `f(context, value)` for every field `name`, in the order received.
  virtual void each(std::string_view name, void (*f)(void*, std::string_view),
                    void* context) const = 0;

 protected:
  ~header_source() = default;
};

/// A request head the framing layer has read and found well framed (its Host and
/// Transfer-Encoding checked, its body's length known).
struct request_view {
  std::string_view method;       ///< as sent
  std::string_view target;       ///< as sent (origin or absolute form)
  const header_source* headers;  ///< its fields; never null
  core::address peer;            ///< the socket's (or the PROXY header's) peer
  bool tls = false;              ///< it came over TLS
  bool upgrade = false;          ///< it asks for a WebSocket (Upgrade and Connection)
  bool has_body = false;         ///< it announces a body (chunked, or a length > 0)
  bool body_done = true;         ///< nothing of it is left to read after the head
  bool keep_alive = true;        ///< the client asked to keep the connection
  core::nanos now = 0;           ///< the instant of the decision
  /// The route already chosen for it, or null: admission routes it. The simulator routes a
  /// line ahead (to prefetch its store slots), and knows a logged preflight's category only
  /// from the log (which does not show the method the preflight announced).
  const policy::route* route = nullptr;
  /// The client's verified TLS certificate (docs/design.md §17), or null: none asked for,
  /// none presented, or not over TLS. Read once per connection, after its handshake.
  const core::client_certificate* certificate = nullptr;
};

/// The header lookup policy::router and policy::key_sources take: `context` is a
/// header_source.
inline std::string_view header_of(const void* context, std::string_view name) {
  return static_cast<const header_source*>(context)->value(name);
}

}  // namespace tollgate::admission
