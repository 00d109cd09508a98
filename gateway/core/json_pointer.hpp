#pragma once
/// JSON pointers (RFC 6901) as the configuration names a field of a message with them
/// (docs/design.md §19, `type_from: { json: /type }`).

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tollgate::core {

/// A JSON pointer's reference tokens, unescaped (`~1` is `/`, `~0` is `~`); at least one.
struct json_pointer {
  std::vector<std::string> tokens;
  /// `text` parsed: "/type", "/params/0/method". Nothing, with `error` set, unless it starts
  /// with '/', every '~' is followed by '0' or '1', and it has at most max_tokens tokens.
  static std::optional<json_pointer> parse(std::string_view text, std::string& error);
  static constexpr std::size_t max_tokens = 16;
};

}  // namespace tollgate::core
