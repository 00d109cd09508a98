#pragma once
/// Open connections per client address (like nginx `limit_conn`): counted exactly across every
/// worker, taken when a connection's client is known and given back however the connection
/// ends. IPv4 clients are counted per address, IPv6 clients per /64 (one subscriber's
/// addresses); networks per IPv4 /24 and IPv6 /48. Internal to net/.

#include <array>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "gateway/core/address.hpp"

namespace tollgate::net {

/// Counts of open connections by client.
/// Thread safety: every member function may be called from any thread (sharded locks, taken
/// once when a connection opens and once when it closes, never per request).
class address_slots {
 public:
  /// The key a client's connections are counted under.
  static std::uint64_t key_of(const core::address& a) noexcept;
  /// The key a client's network is counted under (IPv4 /24, IPv6 /48).
  static std::uint64_t network_key_of(const core::address& a) noexcept;

  /// Takes a slot for `key` if fewer than `cap` are taken; false (nothing taken) otherwise.
  bool try_take(std::uint64_t key, std::uint32_t cap);
  /// Gives back a slot taken for `key`.
  void give_back(std::uint64_t key) noexcept;
  /// Slots taken for `key` now.
  std::uint32_t taken(std::uint64_t key);

 private:
  struct shard {
    std::mutex mutex;                                         ///< guards counts
    std::unordered_map<std::uint64_t, std::uint32_t> counts;  ///< only keys with a slot taken
  };
  shard& shard_of(std::uint64_t key) noexcept {
    return shards_[(key * 0x9E3779B97F4A7C15ULL) >> 58];
  }
  std::array<shard, 64> shards_;  ///< by the top bits of a mixed key
};

/// A slot held for one connection; given back when destroyed.
class address_slot {
 public:
  address_slot() = default;
  address_slot(address_slots& slots, std::uint64_t key) : slots_(&slots), key_(key) {}
  address_slot(address_slot&& o) noexcept : slots_(o.slots_), key_(o.key_) { o.slots_ = nullptr; }
  address_slot& operator=(address_slot&& o) noexcept {
    if (this != &o) {
      release();
      slots_ = o.slots_;
      key_ = o.key_;
      o.slots_ = nullptr;
    }
    return *this;
  }
  ~address_slot() { release(); }

 private:
  void release() noexcept {
    if (slots_ != nullptr) slots_->give_back(key_);
    slots_ = nullptr;
  }
  address_slots* slots_ = nullptr;  ///< nullptr: holds nothing
  std::uint64_t key_ = 0;           ///< the client's key
};

/// A connection's places under the connection caps; empty for a peer inside trusted_proxies.
struct client_places {
  address_slot address;  ///< under limits.max_connections_per_address
  address_slot network;  ///< under limits.max_connections_per_network
};

}  // namespace tollgate::net
