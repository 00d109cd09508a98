#include "gateway/net/local_answer.hpp"

#include <array>

#include "gateway/core/text.hpp"
#include "gateway/net/heads.hpp"
#include "gateway/net/stream_io.hpp"

namespace tollgate::net {

void render_local_head(std::string& head, const local_answer& a) {
  const auto [status, body, extra_fields, content_type, rate_limit, keep_alive, version, timeout,
              head_only] = a;
  head.clear();
  head += version < 11 ? "HTTP/1.0 " : "HTTP/1.1 ";
  core::append_decimal(head, static_cast<std::int64_t>(status));
  head += ' ';
  head += sv(http::obsolete_reason(status));
  head += "\r\nServer: tollgate\r\n";
  if (!body.empty()) {  // an answered preflight has no body, and no type
    head += "Content-Type: ";
    head += content_type.empty() ? std::string_view("application/problem+json") : content_type;
    head += "\r\n";
  }
  if (rate_limit != nullptr) append_rate_limit_fields(head, *rate_limit);
  head += extra_fields;
  head += "Content-Length: ";
  core::append_decimal(head, static_cast<std::int64_t>(body.size()));
  head += "\r\n";
  if (version >= 11 && !keep_alive) head += "Connection: close\r\n";
  if (version < 11 && keep_alive) head += "Connection: keep-alive\r\n";
  head += "\r\n";
}

task<bool> write_local(deadline_watch& watch, connection_scratch& sc, const local_answer& a) {
  const auto [status, body, extra_fields, content_type, rate_limit, keep_alive, version, timeout,
              head_only] = a;
  sc.status = static_cast<unsigned>(status);
  std::string& head = sc.head;
  render_local_head(head, a);
  watch.client_for(timeout);
  // A HEAD's answer says the length of the body a GET would get, and sends none: bytes after
  // it would be read as the next response on a kept connection.
  std::array<asio::const_buffer, 2> pieces{asio::buffer(head),
                                           asio::buffer(body.data(), head_only ? 0 : body.size())};
  const error_code ec = co_await write_all(watch.stream, pieces);
  co_return !ec && keep_alive;
}

}  // namespace tollgate::net
