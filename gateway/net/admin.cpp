#include "gateway/net/admin.hpp"

#include <spdlog/spdlog.h>

#include "gateway/core/text.hpp"
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

asio::awaitable<void> serve_admin(tcp::socket socket, const admin_server::handlers& h) {
  beast::tcp_stream stream(std::move(socket));
  beast::flat_buffer buffer;
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(8 * 1024);
    parser.body_limit(8 * 1024);  // a ban's duration and note: a JSON object of a few fields
    stream.expires_after(std::chrono::seconds(30));
    auto [ec, n] = co_await http::async_read(stream, buffer, parser, use_tuple);
    if (ec) co_return;  // closed, idle or garbage: an operator's client will retry
    const auto& req = parser.get();
    const std::string_view target(req.target().data(), req.target().size());
    const std::string_view path = target.substr(0, target.find('?'));
    http::response<http::string_body> res{http::status::ok, req.version()};
    res.set(http::field::server, "tollgate");
    res.set(http::field::content_type, "text/plain; charset=utf-8");
    const bool api = path.starts_with("/admin/");
    if (api) {
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
    res.prepare_payload();
    auto [wec, wn] = co_await http::async_write(stream, res, use_tuple);
    if (wec || !res.keep_alive()) co_return;
  }
}

asio::awaitable<void> accept_admin(tcp::acceptor& acceptor, const admin_server::handlers& h) {
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(use_tuple);
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
    if (ec) continue;
    asio::co_spawn(acceptor.get_executor(), serve_admin(std::move(socket), h),
                   [](std::exception_ptr e) {
                     if (!e) return;
                     try {
                       std::rethrow_exception(e);
                     } catch (const std::exception& ex) {
                       spdlog::error("an admin session ended by an exception: {}", ex.what());
                     }
                   });
  }
}

}  // namespace

admin_server::admin_server(asio::io_context& io, const tcp::endpoint& endpoint, handlers h)
    : acceptor_(io), handlers_(std::move(h)) {
  acceptor_.open(endpoint.protocol());
  acceptor_.set_option(asio::socket_base::reuse_address(true));
  acceptor_.bind(endpoint);
  acceptor_.listen();
}

void admin_server::start() {
  asio::co_spawn(acceptor_.get_executor(), accept_admin(acceptor_, handlers_),
                 [](std::exception_ptr e) {
                   if (e) spdlog::error("the admin accept loop ended by an exception");
                 });
}

void admin_server::stop() {
  error_code ignored;
  acceptor_.close(ignored);
}

}  // namespace tollgate::net
