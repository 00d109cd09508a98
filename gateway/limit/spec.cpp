#include "gateway/limit/spec.hpp"

namespace tollgate::limit {

std::uint32_t scope_of(std::string_view state_name) noexcept {
  // FNV-1a: not keyed, on purpose. Names are the operator's, not an attacker's, and a fixed
  // function gives the same scope in every process.
  std::uint32_t h = 2166136261u;
  for (const char c : state_name) {
    h ^= static_cast<unsigned char>(c);
    h *= 16777619u;
  }
  return h == 0 ? 1 : h;
}

}  // namespace tollgate::limit
