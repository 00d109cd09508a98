#include "gateway/net/admin.hpp"

#include <spdlog/spdlog.h>

#include <array>

#include "gateway/core/text.hpp"
#include "gateway/net/accept_failures.hpp"
#include "gateway/pow/crypto.hpp"

namespace tollgate::net {

namespace {

using admin_request = http::request<http::string_body>;

/// Whether `req` carries the admin token (compared in constant time) in the Bearer scheme,
/// spelt in any case.
bool authorized(const admin_server::handlers& h, const admin_request& req) {
  if (h.token.empty()) return true;
  const auto field = req[http::field::authorization];
  const std::string_view given = core::bearer_token({field.data(), field.size()});
  return given.size() == h.token.size() &&
         pow::equal_secret(given.data(), h.token.data(), h.token.size());
}

std::string_view sv(beast::string_view s) {
  return {s.data(), s.size()};
}

void answer_api(const admin_server::handlers& h, const admin_request& req, std::string peer,
                std::string_view target, http::response<http::string_body>& res) {
  const auto q = target.find('?');
  const admin_server::request r{
      sv(req.method_string()),
      target.substr(0, q),
      q == std::string_view::npos ? std::string_view() : target.substr(q + 1),
      req.body(),
      std::move(peer),
      !h.token.empty()};
  if (!authorized(h, req)) {
    // A refused attempt to change something is an audit line too (never the token sent).
    if (req.method() != http::verb::get && req.method() != http::verb::head) {
      spdlog::warn("admin audit: action=refused request=\"{} {}\" result=401 peer={} token={}",
                   r.method, r.path, r.peer,
                   req.find(http::field::authorization) == req.end() ? "absent" : "wrong");
    }
    res.result(http::status::unauthorized);
    res.set(http::field::www_authenticate, "Bearer");
    res.set(http::field::content_type, "application/problem+json");
    res.body() = R"({"type":"about:blank","title":"Unauthorized","status":401,)"
                 R"("detail":"a bearer token is required","error":"a bearer token is required"})";
    return;
  }
  auto reply = h.api(r);
  res.result(static_cast<http::status>(reply.status));
  res.set(http::field::content_type, reply.content_type);
  if (!reply.allow.empty()) res.set(http::field::allow, reply.allow);
  res.body() = std::move(reply.body);
}

/// "address:port" of the socket's peer, or "unknown".
std::string peer_of(const beast::tcp_stream& stream) {
  error_code ec;
  const auto ep = stream.socket().remote_endpoint(ec);
  if (ec) return "unknown";
  return ep.address().is_v6() ? "[" + ep.address().to_string() + "]:" + std::to_string(ep.port())
                              : ep.address().to_string() + ":" + std::to_string(ep.port());
}

/// A refusal of the admin listener's own: the request cannot be read, so the connection
/// closes after it.
void refuse_request(http::response<http::string_body>& res, http::status status,
                    std::string_view text) {
  res.result(status);
  res.body() = std::string(text) + "\n";
  res.keep_alive(false);
}

/// Logs what ended an admin coroutine with an exception: a bug.
void log_exception(std::exception_ptr e, const char* what) {
  if (!e) return;
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    spdlog::error("{} ended by an exception: {}", what, ex.what());
  }
}

}  // namespace

admin_server::admin_server(asio::io_context& io, const tcp::endpoint& endpoint, bounds b,
                           handlers h)
    : acceptor_(io), bounds_(b), handlers_(std::move(h)) {
  acceptor_.open(endpoint.protocol());
  acceptor_.set_option(asio::socket_base::reuse_address(true));
  acceptor_.bind(endpoint);
  acceptor_.listen();
}

asio::awaitable<void> admin_server::serve(tcp::socket socket) {
  beast::tcp_stream stream(std::move(socket));
  beast::flat_buffer buffer;
  const handlers& h = handlers_;
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(8 * 1024);
    parser.body_limit(8 * 1024);  // a ban's duration and note: a JSON object of a few fields
    // One bound for the wait between requests and the reading of one: an idle or slow
    // operator's connection holds its place for request_timeout at most.
    stream.expires_after(bounds_.request_timeout);
    tcp::socket* const mine = &stream.socket();
    waiting_.push_back(mine);
    auto [ec, n] = co_await http::async_read(stream, buffer, parser, use_tuple);
    // Still listed unless the accept loop closed it to make room.
    std::erase(waiting_, mine);
    const bool over_bounds = ec == http::error::body_limit || ec == http::error::header_limit;
    http::response<http::string_body> res{http::status::ok, 11};
    res.set(http::field::server, "tollgate");
    res.set(http::field::content_type, "text/plain; charset=utf-8");
    if (ec == http::error::body_limit) {
      refuse_request(res, http::status::payload_too_large, "request body over 8 KiB");
    } else if (ec == http::error::header_limit) {
      refuse_request(res, http::status::request_header_fields_too_large, "request head over 8 KiB");
    } else if (ec) {
      co_return;  // closed, idle or garbage: an operator's client will retry
    } else {
      const auto& req = parser.get();
      res.version(req.version());
      const std::string_view target(req.target().data(), req.target().size());
      const std::string_view path = target.substr(0, target.find('?'));
      if (path.starts_with("/admin/")) {
        answer_api(h, req, peer_of(stream), target, res);
      } else if (req.method() != http::verb::get && req.method() != http::verb::head) {
        res.result(http::status::method_not_allowed);
        res.set(http::field::allow, "GET, HEAD");
        res.body() = "method not allowed\n";
      } else if (path == "/metrics") {
        res.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
        res.body() = h.metrics();
      } else if (path == "/healthz") {
        res.body() = "ok\n";
      } else if (path == "/readyz") {
        const auto [ready, text] = h.ready();
        res.result(ready ? http::status::ok : http::status::service_unavailable);
        res.body() = text + "\n";
      } else {
        res.result(http::status::not_found);
        res.body() = "not found\n";
      }
      res.keep_alive(req.keep_alive());
    }
    res.prepare_payload();
    stream.expires_after(bounds_.request_timeout);  // a reader that never reads is let go
    waiting_.push_back(mine);
    auto [wec, wn] = co_await http::async_write(stream, res, use_tuple);
    std::erase(waiting_, mine);
    if (!wec && over_bounds) {
      // What is left of the refused request is read and dropped (64 KiB and 1 s at most) after
      // the answer: closing with it unread would reset the connection, and the client might
      // lose the 413 or 431.
      error_code ignored;
      stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
      stream.expires_after(std::chrono::seconds(1));
      std::array<char, 4096> drop;
      waiting_.push_back(mine);
      for (std::size_t dropped = 0; dropped < 64 * 1024;) {
        auto [rec, got] = co_await stream.async_read_some(asio::buffer(drop), use_tuple);
        if (rec) break;
        dropped += got;
      }
      std::erase(waiting_, mine);
    }
    if (wec || !res.keep_alive()) co_return;
  }
}

asio::awaitable<void> admin_server::accept_loop() {
  accept_failures failures;
  std::uint64_t refused_unlogged = 0, closed_unlogged = 0;
  std::chrono::steady_clock::time_point refused_logged{};
  for (;;) {
    auto [ec, socket] = co_await acceptor_.async_accept(use_tuple);
    if (ec == asio::error::operation_aborted || !acceptor_.is_open()) co_return;
    if (ec) {
      const auto pause = failures.note(ec, "admin");
      if (pause.count() > 0) {
        asio::steady_timer wait(acceptor_.get_executor(), pause);
        co_await wait.async_wait(use_tuple);
      }
      continue;
    }
    if (open_ >= bounds_.max_connections) {
      if (!waiting_.empty()) {
        // The connection waiting longest on its peer makes room (its session then ends): ones
        // that send or read nothing cannot hold the listener against a scraper or an operator.
        error_code ignored;
        waiting_.front()->close(ignored);
        waiting_.erase(waiting_.begin());
        ++closed_for_room_;
        ++closed_unlogged;
      } else {
        // Every place is answering a request: a reset, as the public listeners refuse.
        error_code ignored;
        socket.set_option(asio::socket_base::linger(true, 0), ignored);
        socket.close(ignored);
        ++refused_;
        ++refused_unlogged;
      }
      const auto now = std::chrono::steady_clock::now();
      if (now - refused_logged >= accept_failures::interval) {
        spdlog::warn(
            "admin: {} connections open (admin.max_connections): closed {} waiting on their "
            "peer to make room, refused {}",
            open_, closed_unlogged, refused_unlogged);
        refused_unlogged = closed_unlogged = 0;
        refused_logged = now;
      }
      if (!socket.is_open()) continue;
    }
    ++open_;
    asio::co_spawn(acceptor_.get_executor(), serve(std::move(socket)),
                   [this](std::exception_ptr e) {
                     --open_;
                     log_exception(e, "an admin session");
                   });
  }
}

void admin_server::start() {
  asio::co_spawn(acceptor_.get_executor(), accept_loop(),
                 [](std::exception_ptr e) { log_exception(e, "the admin accept loop"); });
}

void admin_server::stop() {
  error_code ignored;
  acceptor_.close(ignored);
}

}  // namespace tollgate::net
