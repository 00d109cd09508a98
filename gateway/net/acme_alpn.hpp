#pragma once
/// The tls-alpn-01 challenges under way (RFC 8737, docs/design.md §17): domain → the
/// certificate with the acmeIdentifier extension, set by the ACME client on the control thread
/// and chosen by TLS listeners' ALPN callback, on the workers, for a handshake that offers
/// acme-tls/1 and names the domain.

#include <openssl/ssl.h>

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace tollgate::net {

/// A challenge certificate and its key.
struct alpn_identity {
  std::unique_ptr<X509, decltype(&X509_free)> certificate{nullptr,
                                                          X509_free};  ///< with the extension
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key{nullptr, EVP_PKEY_free};  ///< its key
};

/// Thread safety: every member may be called from any thread (one mutex).
class acme_alpn {
 public:
  /// Offers `identity` to acme-tls/1 handshakes for `domain` until erased.
  void set(const std::string& domain, std::shared_ptr<const alpn_identity> identity) {
    const std::lock_guard lock(mutex_);
    map_[domain] = std::move(identity);
  }
  /// Stops offering one for `domain`.
  void erase(const std::string& domain) {
    const std::lock_guard lock(mutex_);
    map_.erase(domain);
  }
  /// The identity for `domain`, when a challenge is under way.
  std::shared_ptr<const alpn_identity> find(const std::string& domain) const {
    const std::lock_guard lock(mutex_);
    const auto it = map_.find(domain);
    return it == map_.end() ? nullptr : it->second;
  }

 private:
  mutable std::mutex mutex_;                                                   ///< guards map_
  std::unordered_map<std::string, std::shared_ptr<const alpn_identity>> map_;  ///< by domain
};

/// The process's one table: OpenSSL's callbacks, set when contexts are made, reach it without
/// a pointer to the running process.
acme_alpn& acme_alpn_challenges();

}  // namespace tollgate::net
