#include "gateway/net/admin.hpp"

#include <spdlog/spdlog.h>

#include "gateway/core/text.hpp"
#include "gateway/pow/crypto.hpp"

namespace tollgate::net {

namespace {

/// Whether `req` carries the admin token (compared in constant time) in the Bearer scheme,
/// spelt in any case.
bool authorized(const admin_server::handlers& h, const http::request<http::empty_body>& req) {
  if (h.token.empty()) return true;
  const auto field = req[http::field::authorization];
  const std::string_view given = core::bearer_token({field.data(), field.size()});
  return given.size() == h.token.size() &&
         pow::equal_secret(given.data(), h.token.data(), h.token.size());
}

void answer_api(const admin_server::handlers& h, const http::request<http::empty_body>& req,
                std::string_view path, http::response<http::string_body>& res) {
  res.set(http::field::content_type, "application/json");
  if (!authorized(h, req)) {
    res.result(http::status::unauthorized);
    res.set(http::field::www_authenticate, "Bearer");
    res.body() = "{\"error\":\"a bearer token is required\"}";
    return;
  }
  const auto reply =
      h.api(std::string_view(req.method_string().data(), req.method_string().size()), path);
  res.result(static_cast<http::status>(reply.status));
  res.body() = reply.body;
}

asio::awaitable<void> serve_admin(tcp::socket socket, const admin_server::handlers& h) {
  beast::tcp_stream stream(std::move(socket));
  beast::flat_buffer buffer;
  for (;;) {
    http::request_parser<http::empty_body> parser;
    parser.header_limit(8 * 1024);
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
      answer_api(h, req, path, res);
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
