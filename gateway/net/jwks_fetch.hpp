#pragma once
/// identity.jwt.jwks_url (docs/design.md §15): the JWK Set fetched over HTTP or HTTPS at start
/// and every jwks_refresh, on the control thread's event loop; each set that reads replaces the
/// verifier's keys, and a failed fetch (unreachable, not 200, over 1 MiB, not a JWK Set) keeps
/// the last good set and is tried again sooner (a tenth of jwks_refresh, at least 5 s).

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "gateway/identity/jwt.hpp"
#include "gateway/net/asio.hpp"

namespace tollgate::net {

/// The parts of an http:// or https:// URL.
struct url_parts {
  bool tls = false;    ///< https
  std::string host;    ///< without brackets
  std::string port;    ///< given, else 80 or 443
  std::string target;  ///< path and query, "/" at least
};

/// The parts of `url`, when it is an http:// or https:// URL with a host.
std::optional<url_parts> parse_url(const std::string& url);

/// Thread safety: used from the thread that runs `io` only.
class jwks_fetcher {
 public:
  /// Starts fetching `url` every `refresh` into `target`'s keys.
  jwks_fetcher(asio::io_context& io, std::string url, std::chrono::nanoseconds refresh,
               std::shared_ptr<identity::verifier> target);
  /// Stops: a fetch under way is abandoned.
  ~jwks_fetcher();
  jwks_fetcher(const jwks_fetcher&) = delete;
  jwks_fetcher& operator=(const jwks_fetcher&) = delete;

  /// The URL it fetches.
  const std::string& url() const noexcept;
  /// Puts the keys of later fetches into `target` (a reload's new verifier, already seeded with
  /// the keys in force), and fetches now when `refresh` changed.
  void retarget(std::shared_ptr<identity::verifier> target, std::chrono::nanoseconds refresh);

  struct state;

 private:
  std::shared_ptr<state> state_;
};

}  // namespace tollgate::net
