#include "gateway/core/json_pointer.hpp"

namespace tollgate::core {

std::optional<json_pointer> json_pointer::parse(std::string_view text, std::string& error) {
  if (text.empty() || text[0] != '/') {
    error = "a JSON pointer starts with '/' (as /type or /method)";
    return std::nullopt;
  }
  json_pointer p;
  std::string token;
  for (std::size_t i = 1; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == '/') {
      p.tokens.push_back(std::move(token));
      token.clear();
      if (p.tokens.size() > max_tokens) {
        error = "a JSON pointer of more than " + std::to_string(max_tokens) + " tokens";
        return std::nullopt;
      }
      continue;
    }
    if (text[i] == '~') {
      if (i + 1 < text.size() && (text[i + 1] == '0' || text[i + 1] == '1')) {
        token += text[i + 1] == '0' ? '~' : '/';
        ++i;
        continue;
      }
      error = "'~' in a JSON pointer is written ~0, and '/' inside a token ~1";
      return std::nullopt;
    }
    token += text[i];
  }
  return p;
}

}  // namespace tollgate::core
