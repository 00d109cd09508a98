#include "gateway/net/jwks_fetch.hpp"

#include <spdlog/spdlog.h>

#include <boost/asio/ssl.hpp>
#include <boost/beast/ssl.hpp>
#include <optional>

namespace tollgate::net {

namespace {

namespace ssl = asio::ssl;

}  // namespace

std::optional<url_parts> parse_url(const std::string& url) {
  url_parts u;
  std::string_view rest(url);
  if (rest.starts_with("https://")) {
    u.tls = true;
    rest.remove_prefix(8);
  } else if (rest.starts_with("http://")) {
    rest.remove_prefix(7);
  } else {
    return std::nullopt;
  }
  const std::size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  u.target = slash == std::string_view::npos ? "/" : std::string(rest.substr(slash));
  if (authority.starts_with('[')) {  // [IPv6]:port
    const std::size_t close = authority.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    u.host = std::string(authority.substr(1, close - 1));
    authority.remove_prefix(close + 1);
    if (authority.starts_with(':')) u.port = std::string(authority.substr(1));
  } else {
    const std::size_t colon = authority.rfind(':');
    u.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) u.port = std::string(authority.substr(colon + 1));
  }
  if (u.host.empty()) return std::nullopt;
  if (u.port.empty()) u.port = u.tls ? "443" : "80";
  return u;
}

namespace {

/// Most bytes of a JWK Set's response body.
constexpr std::size_t max_body = 1 << 20;
/// Time one fetch may take, from resolving to the last byte.
constexpr auto fetch_timeout = std::chrono::seconds(10);

}  // namespace

struct jwks_fetcher::state : std::enable_shared_from_this<jwks_fetcher::state> {
  asio::io_context& io;
  std::string url;
  std::chrono::nanoseconds refresh;
  std::shared_ptr<identity::verifier> target;
  asio::steady_timer timer{io};
  bool stopped = false;
  ssl::context tls{ssl::context::tls_client};

  state(asio::io_context& i, std::string u, std::chrono::nanoseconds r,
        std::shared_ptr<identity::verifier> t)
      : io(i), url(std::move(u)), refresh(r), target(std::move(t)) {
    tls.set_default_verify_paths();
    tls.set_verify_mode(ssl::verify_peer);
  }

  /// One fetch: the body, or an empty string with `why` set.
  template <class Stream>
  asio::awaitable<std::string> exchange(Stream& stream, const url_parts& u, std::string& why) {
    http::request<http::empty_body> req{http::verb::get, u.target, 11};
    req.set(http::field::host, u.host);
    req.set(http::field::accept, "application/jwk-set+json, application/json");
    req.set(http::field::user_agent, "tollgate");
    req.set(http::field::connection, "close");
    auto [we, wn] = co_await http::async_write(stream, req, asio::as_tuple(asio::use_awaitable));
    if (we) {
      why = "sending: " + we.message();
      co_return std::string();
    }
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(max_body);
    auto [re, rn] =
        co_await http::async_read(stream, buffer, parser, asio::as_tuple(asio::use_awaitable));
    if (re) {
      why = "reading: " + re.message();
      co_return std::string();
    }
    if (parser.get().result_int() != 200) {
      why = "status " + std::to_string(parser.get().result_int());
      co_return std::string();
    }
    co_return std::move(parser.get().body());
  }

  asio::awaitable<std::string> fetch(std::string& why) {
    const auto u = parse_url(url);
    if (!u) {
      why = "not an http:// or https:// URL";
      co_return std::string();
    }
    tcp::resolver resolver(io);
    auto [ec, results] =
        co_await resolver.async_resolve(u->host, u->port, asio::as_tuple(asio::use_awaitable));
    if (ec) {
      why = "resolving " + u->host + ": " + ec.message();
      co_return std::string();
    }
    if (!u->tls) {
      beast::tcp_stream stream(io);
      stream.expires_after(fetch_timeout);
      auto [ce, ep] = co_await stream.async_connect(results, asio::as_tuple(asio::use_awaitable));
      if (ce) {
        why = "connecting: " + ce.message();
        co_return std::string();
      }
      co_return co_await exchange(stream, *u, why);
    }
    beast::ssl_stream<beast::tcp_stream> stream(io, tls);
    SSL_set_tlsext_host_name(stream.native_handle(), u->host.c_str());
    stream.set_verify_callback(ssl::host_name_verification(u->host));
    beast::get_lowest_layer(stream).expires_after(fetch_timeout);
    auto [ce, ep] = co_await beast::get_lowest_layer(stream).async_connect(
        results, asio::as_tuple(asio::use_awaitable));
    if (ce) {
      why = "connecting: " + ce.message();
      co_return std::string();
    }
    auto [he] = co_await stream.async_handshake(ssl::stream_base::client,
                                                asio::as_tuple(asio::use_awaitable));
    if (he) {
      why = "TLS: " + he.message();
      co_return std::string();
    }
    co_return co_await exchange(stream, *u, why);
  }

  asio::awaitable<void> run() {
    auto self = shared_from_this();  // alive as long as the loop
    while (!stopped) {
      std::string why;
      const std::string body = co_await fetch(why);
      if (stopped) break;
      std::chrono::nanoseconds next = refresh;
      if (why.empty()) {
        try {
          std::vector<std::string> skipped;
          auto keys = identity::key_set::parse(body, &skipped);
          for (const auto& s : skipped)
            spdlog::warn("identity.jwt.jwks_url: {} left out: {}", url, s);
          const std::size_t n = keys->keys().size();
          target->set_keys(std::move(keys));
          spdlog::info("identity.jwt.jwks_url: {} keys from {}", n, url);
        } catch (const std::exception& e) {
          why = std::string("not a usable JWK Set: ") + e.what();
        }
      }
      if (!why.empty()) {
        next = std::max<std::chrono::nanoseconds>(refresh / 10, std::chrono::seconds(5));
        next = std::min(next, refresh);
        spdlog::warn("identity.jwt.jwks_url: {}: {}; the keys in force stay", url, why);
      }
      timer.expires_after(next);
      co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    }
  }
};

jwks_fetcher::jwks_fetcher(asio::io_context& io, std::string url, std::chrono::nanoseconds refresh,
                           std::shared_ptr<identity::verifier> target)
    : state_(std::make_shared<state>(io, std::move(url), refresh, std::move(target))) {
  asio::co_spawn(io, state_->run(), asio::detached);
}

jwks_fetcher::~jwks_fetcher() {
  state_->stopped = true;
  state_->timer.cancel();
}

const std::string& jwks_fetcher::url() const noexcept {
  return state_->url;
}

void jwks_fetcher::retarget(std::shared_ptr<identity::verifier> target,
                            std::chrono::nanoseconds refresh) {
  state_->target = std::move(target);
  if (refresh != state_->refresh) {
    state_->refresh = refresh;
    state_->timer.cancel();  // fetch now, then at the new pace
  }
}

}  // namespace tollgate::net
