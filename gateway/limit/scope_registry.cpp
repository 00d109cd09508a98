#include "gateway/limit/scope_registry.hpp"

namespace tollgate::limit {

std::uint32_t scope_registry::id(std::string_view name) {
  std::lock_guard guard(mutex_);
  const auto [it, added] =
      ids_.try_emplace(std::string(name), static_cast<std::uint32_t>(names_.size() + 1));
  if (added) names_.emplace_back(name);
  return it->second;
}

std::string scope_registry::name(std::uint32_t id) const {
  std::lock_guard guard(mutex_);
  return id >= 1 && id <= names_.size() ? names_[id - 1] : std::string();
}

}  // namespace tollgate::limit
