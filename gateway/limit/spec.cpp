#include "gateway/limit/spec.hpp"

namespace tollgate::limit {

std::string_view source_name(key_source s) noexcept {
  switch (s) {
    case key_source::address:
      return "address";
    case key_source::header:
      return "header";
    case key_source::query:
      return "query";
    case key_source::cookie:
      return "cookie";
    case key_source::bearer:
      return "bearer";
    case key_source::global:
      return "global";
  }
  return "address";
}

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
