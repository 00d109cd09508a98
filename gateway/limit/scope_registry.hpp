#pragma once
/// Stable numeric ids for named limits, so state keyed by id survives a configuration reload.

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tollgate::limit {

/// Hands out one id per limit name ("auth/ipv4_network/24") for the life of the process: a
/// reload that keeps a limit's name keeps its id, and with it the limiter state.
/// Thread safety: all members lock; used at load time only, never per request.
class scope_registry {
 public:
  /// The id of `name`, assigning the next one (from 1) on first sight.
  std::uint32_t id(std::string_view name);
  /// The name of `id`, or "" when unknown.
  std::string name(std::uint32_t id) const;

 private:
  mutable std::mutex mutex_;                            ///< guards both maps
  std::unordered_map<std::string, std::uint32_t> ids_;  ///< name -> id
  std::vector<std::string> names_;                      ///< id - 1 -> name
};

}  // namespace tollgate::limit
