#include "gateway/net/http_helpers.hpp"

#include "gateway/core/text.hpp"

namespace tollgate::net {

std::string problem_body(int status, std::string_view title, std::string_view detail) {
  std::string out = R"({"type":"about:blank","title":")";
  out += title;
  out += R"(","status":)";
  out += std::to_string(status);
  out += R"(,"detail":")";
  out += detail;
  out += R"("})";
  return out;
}

void set_rate_limit_fields(http::fields& f, const policy::rate_limit_fields& r) {
  if (!r.present) return;
  f.set("X-RateLimit-Limit", r.limit);
  f.set("X-RateLimit-Remaining", r.remaining);
  f.set("X-RateLimit-Reset", r.reset);
  f.set("X-RateLimit-Level", r.level);
  f.set("RateLimit-Policy", r.policy);
  f.set("RateLimit", r.ratelimit);
  if (!r.retry_after.empty()) {
    f.set(http::field::retry_after, r.retry_after);
    f.set("X-RateLimit-Reason", r.reason);
  }
}

void strip_hop_by_hop(http::fields& f) {
  for (const auto& token : http::token_list(f[http::field::connection])) {
    const std::string_view name = sv(token);
    // "Connection: content-length" must not unframe a message: framing is ours to set.
    if (core::iequals(name, "content-length") || core::iequals(name, "host")) continue;
    f.erase(token);
  }
  f.erase(http::field::connection);
  f.erase(http::field::keep_alive);
  f.erase(http::field::proxy_connection);
  f.erase(http::field::te);
  f.erase(http::field::trailer);
  f.erase(http::field::transfer_encoding);
  f.erase(http::field::upgrade);
}

asio::awaitable<bool> write_local(deadline_watch& watch, unsigned version, http::status status,
                                  std::string body, const policy::rate_limit_fields* rate_limit,
                                  bool keep_alive, std::chrono::nanoseconds timeout) {
  http::response<http::string_body> res{status, version < 11 ? 10u : 11u};
  res.set(http::field::server, "tollgate");
  res.set(http::field::content_type, "application/problem+json");
  if (rate_limit != nullptr) set_rate_limit_fields(res.base(), *rate_limit);
  res.body() = std::move(body);
  res.keep_alive(keep_alive);
  res.prepare_payload();
  watch.client_for(timeout);
  auto [ec, n] = co_await http::async_write(watch.client, res, use_tuple);
  co_return !ec && keep_alive;
}

}  // namespace tollgate::net
