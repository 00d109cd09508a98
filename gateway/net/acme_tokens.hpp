#pragma once
/// The http-01 challenges under way (RFC 8555 §8.3, docs/design.md §17): token → key
/// authorization, set by the ACME client on the control thread and read by the workers when a
/// plain listener is asked for /.well-known/acme-challenge/<token>.

#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace tollgate::net {

/// The path prefix of http-01 answers.
inline constexpr std::string_view acme_challenge_prefix = "/.well-known/acme-challenge/";

/// Thread safety: every member may be called from any thread (one mutex; a handful of entries,
/// looked up only for requests under acme_challenge_prefix).
class acme_tokens {
 public:
  /// Answers `token` with `authorization` until erased.
  void set(const std::string& token, const std::string& authorization) {
    const std::lock_guard lock(mutex_);
    map_[token] = authorization;
  }
  /// Stops answering `token`.
  void erase(const std::string& token) {
    const std::lock_guard lock(mutex_);
    map_.erase(token);
  }
  /// The key authorization of `token`, when it is under way.
  std::optional<std::string> find(std::string_view token) const {
    const std::lock_guard lock(mutex_);
    const auto it = map_.find(std::string(token));
    if (it == map_.end()) return std::nullopt;
    return it->second;
  }

 private:
  mutable std::mutex mutex_;                          ///< guards map_
  std::unordered_map<std::string, std::string> map_;  ///< token → key authorization
};

}  // namespace tollgate::net
