#pragma once
/// Writing an answer the gateway makes itself: its head rendered into the connection's head
/// buffer and sent with the body in one write. Internal to net/.

#include <chrono>
#include <string_view>

#include "gateway/net/asio.hpp"
#include "gateway/net/deadline.hpp"
#include "gateway/net/scratch.hpp"
#include "gateway/policy/verdict.hpp"

namespace tollgate::net {

/// An answer the gateway makes itself (problem+json).
struct local_answer {
  http::status status = http::status::ok;           ///< its status
  std::string_view body;                            ///< its body (alive until written)
  std::string_view extra_fields;                    ///< further header lines, each with CRLF
  std::string_view content_type;                    ///< "": application/problem+json
  const policy::rate_limit_fields* rate = nullptr;  ///< rate-limit fields, when checked
  bool keep_alive = false;                          ///< the connection stays open afterwards
  unsigned version = 11;                            ///< the client's HTTP version
  std::chrono::nanoseconds timeout{0};              ///< for the whole write
  bool head_only = false;  ///< the answer to HEAD: its head alone (Content-Length the body's)
};

/// Renders the head of `a` (status line, fields, framing) into `head`; records nothing.
void render_local_head(std::string& head, const local_answer& a);

/// Writes `a`, its head rendered into the connection's head buffer and sent with the body in
/// one write; records its status. Returns whether the connection stays open.
task<bool> write_local(deadline_watch& watch, connection_scratch& sc, const local_answer& a);

}  // namespace tollgate::net
