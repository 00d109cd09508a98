#include "gateway/metrics/counters.hpp"

#include <algorithm>

namespace tollgate::metrics {

std::string_view upstream_error_name(upstream_error e) noexcept {
  constexpr std::string_view names[upstream_error_count] = {"connect", "timeout", "reset"};
  return names[static_cast<std::size_t>(e)];
}

std::uint16_t name_table::index(std::string_view name) {
  std::lock_guard guard(mutex_);
  const auto it = std::find(names_.begin(), names_.end(), name);
  if (it != names_.end()) return static_cast<std::uint16_t>(it - names_.begin());
  if (names_.size() == capacity_ - 1) names_.emplace_back("other");
  if (names_.size() >= capacity_) return static_cast<std::uint16_t>(capacity_ - 1);
  names_.emplace_back(name);
  return static_cast<std::uint16_t>(names_.size() - 1);
}

std::vector<std::string> name_table::names() const {
  std::lock_guard guard(mutex_);
  return names_;
}

}  // namespace tollgate::metrics
