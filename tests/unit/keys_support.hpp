#pragma once
// Request headers for compiled_policy::request in unit tests, without an HTTP library.

#include <map>
#include <string>
#include <string_view>

#include "gateway/core/text.hpp"
#include "gateway/policy/compiled_policy.hpp"

namespace tollgate::test {

/// Header fields of a test request, looked up without case.
struct fake_request {
  std::map<std::string, std::string> headers;             ///< lower-case name -> value
  std::string target = "/";                               ///< with its query, if any
  const core::client_certificate* certificate = nullptr;  ///< its verified client certificate

  static std::string_view lookup(const void* self, std::string_view name) {
    const auto& h = static_cast<const fake_request*>(self)->headers;
    std::string lower(name);
    for (char& c : lower)
      c = core::ascii_lower(c);
    const auto it = h.find(lower);
    return it == h.end() ? std::string_view() : std::string_view(it->second);
  }
  /// The key sources of this request.
  policy::key_sources keys() const { return {&lookup, this, target, nullptr, certificate}; }
};

}  // namespace tollgate::test
