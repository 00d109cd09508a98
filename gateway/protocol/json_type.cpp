#include "gateway/protocol/json_type.hpp"

namespace tollgate::protocol::ws {

namespace {

bool space(std::uint8_t c) noexcept {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

bool number_byte(std::uint8_t c) noexcept {
  return (c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-';
}

int hex(std::uint8_t c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/// An array index token of RFC 6901 ("0", or digits without a leading zero), or -1.
std::int64_t index_of(std::string_view token) noexcept {
  if (token.empty() || token.size() > 18 || (token.size() > 1 && token[0] == '0')) return -1;
  std::int64_t v = 0;
  for (const char c : token) {
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

}  // namespace

void type_scanner::reset() noexcept {
  state_ = state::scanning;
  lex_ = lex::value;
  role_ = role::skip;
  depth_ = 0;
  matched_ = 0;
  next_on_path_ = true;  // the document itself
  in_key_ = false;
  escape_ = false;
  hex_left_ = 0;
  high_ = 0;
  value_size_ = 0;
  value_long_ = false;
  literal_rest_ = {};
  number_ = false;
}

type_scanner::state type_scanner::feed(std::span<const std::uint8_t> bytes) noexcept {
  for (std::size_t i = 0; i < bytes.size() && state_ == state::scanning; ++i) {
    if (!step(bytes[i])) break;
  }
  return state_;
}

type_scanner::state type_scanner::finish() noexcept {
  if (state_ == state::scanning) state_ = state::absent;
  return state_;
}

bool type_scanner::selector_matches() const noexcept {
  if (matched_ != depth_ || depth_ == 0 || depth_ > pointer_->tokens.size()) return false;
  const std::int64_t want = index_of(pointer_->tokens[depth_ - 1]);
  return want >= 0 && static_cast<std::uint64_t>(want) == indexes_[depth_];
}

void type_scanner::end_value() noexcept {
  if (depth_ == 0) {  // the document has ended without the value
    lex_ = lex::done;
    state_ = state::absent;
    return;
  }
  lex_ = lex::after_value;
}

bool type_scanner::step(std::uint8_t c) noexcept {
  switch (lex_) {
    case lex::string:
      return string_byte(c);
    case lex::literal:
      if (!number_) {
        if (c != static_cast<std::uint8_t>(literal_rest_.front())) return fail();
        literal_rest_.remove_prefix(1);
        if (literal_rest_.empty()) end_value();
        return state_ == state::scanning;
      }
      if (number_byte(c)) return true;
      end_value();  // the number ends at the byte after it, which is read as what follows
      if (state_ != state::scanning) return false;
      return step(c);
    case lex::done:
      return fail();
    default:
      break;
  }
  if (space(c)) return true;
  switch (lex_) {
    case lex::value:
      return begin_value(c);
    case lex::first_element:
      if (c == ']') break;
      return begin_value(c);
    case lex::first_key:
      if (c == '}') break;
      [[fallthrough]];
    case lex::key:
      if (c != '"') return fail();
      in_key_ = true;
      role_ = matched_ == depth_ && depth_ <= pointer_->tokens.size() ? role::key : role::skip;
      key_at_ = 0;
      key_differs_ = false;
      escape_ = false;
      hex_left_ = 0;
      high_ = 0;
      lex_ = lex::string;
      return true;
    case lex::colon:
      if (c != ':') return fail();
      lex_ = lex::value;
      return true;
    case lex::after_value:
      if (c == ',') {
        if (in_array()) {
          if (depth_ <= json_pointer::max_tokens) ++indexes_[depth_];
          next_on_path_ = selector_matches();
          lex_ = lex::value;
        } else {
          lex_ = lex::key;
        }
        return true;
      }
      if (c == (in_array() ? ']' : '}')) break;
      return fail();
    default:
      return fail();
  }
  // The end of the container at depth_.
  --depth_;
  if (matched_ > depth_) matched_ = depth_;
  end_value();
  return state_ == state::scanning;
}

bool type_scanner::begin_value(std::uint8_t c) noexcept {
  const bool on = next_on_path_;
  next_on_path_ = false;
  const bool target = on && depth_ == pointer_->tokens.size();
  if (c == '"') {
    in_key_ = false;
    role_ = target ? role::target : role::skip;
    escape_ = false;
    hex_left_ = 0;
    high_ = 0;
    lex_ = lex::string;
    return true;
  }
  if (target) return fail();  // not a string: no type
  if (c == '{' || c == '[') {
    if (depth_ == max_depth) return fail();
    const std::uint64_t bit = std::uint64_t{1} << (depth_ % 64);
    if (c == '[') {
      kinds_[depth_ / 64] |= bit;
    } else {
      kinds_[depth_ / 64] &= ~bit;
    }
    ++depth_;
    if (on) matched_ = depth_;
    if (c == '[') {
      if (depth_ <= json_pointer::max_tokens) indexes_[depth_] = 0;
      next_on_path_ = selector_matches();
      lex_ = lex::first_element;
    } else {
      lex_ = lex::first_key;
    }
    return true;
  }
  number_ = false;
  switch (c) {
    case 't':
      literal_rest_ = "rue";
      break;
    case 'f':
      literal_rest_ = "alse";
      break;
    case 'n':
      literal_rest_ = "ull";
      break;
    default:
      if (c != '-' && (c < '0' || c > '9')) return fail();
      number_ = true;
  }
  lex_ = lex::literal;
  return true;
}

bool type_scanner::string_byte(std::uint8_t c) noexcept {
  if (hex_left_ > 0) {
    const int v = hex(c);
    if (v < 0) return fail();
    unit_ = unit_ << 4 | static_cast<std::uint32_t>(v);
    if (--hex_left_ > 0) return true;
    if (unit_ >= 0xD800 && unit_ <= 0xDBFF) {  // a high surrogate: its low half must follow
      if (high_ != 0) return fail();
      high_ = unit_;
      return true;
    }
    if (unit_ >= 0xDC00 && unit_ <= 0xDFFF) {
      if (high_ == 0) return fail();
      const std::uint32_t cp = 0x10000 + ((high_ - 0xD800) << 10) + (unit_ - 0xDC00);
      high_ = 0;
      put(cp);
      return true;
    }
    if (high_ != 0) return fail();
    put(unit_);
    return true;
  }
  if (escape_) {
    escape_ = false;
    if (high_ != 0 && c != 'u') return fail();
    switch (c) {
      case '"':
      case '\\':
      case '/':
        put_byte(c);
        return true;
      case 'b':
        put_byte('\b');
        return true;
      case 'f':
        put_byte('\f');
        return true;
      case 'n':
        put_byte('\n');
        return true;
      case 'r':
        put_byte('\r');
        return true;
      case 't':
        put_byte('\t');
        return true;
      case 'u':
        hex_left_ = 4;
        unit_ = 0;
        return true;
      default:
        return fail();
    }
  }
  if (c == '\\') {
    escape_ = true;
    return true;
  }
  if (high_ != 0 || c < 0x20) return fail();  // a lone surrogate; a control character
  if (c == '"') return string_end();
  put_byte(c);
  return true;
}

bool type_scanner::string_end() noexcept {
  if (in_key_) {
    next_on_path_ =
        role_ == role::key && !key_differs_ && key_at_ == pointer_->tokens[depth_ - 1].size();
    role_ = role::skip;
    lex_ = lex::colon;
    return true;
  }
  if (role_ == role::target) {
    state_ = state::found;
    return false;
  }
  end_value();
  return state_ == state::scanning;
}

void type_scanner::put(std::uint32_t cp) noexcept {
  if (cp < 0x80) {
    put_byte(static_cast<std::uint8_t>(cp));
  } else if (cp < 0x800) {
    put_byte(static_cast<std::uint8_t>(0xC0 | cp >> 6));
    put_byte(static_cast<std::uint8_t>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    put_byte(static_cast<std::uint8_t>(0xE0 | cp >> 12));
    put_byte(static_cast<std::uint8_t>(0x80 | (cp >> 6 & 0x3F)));
    put_byte(static_cast<std::uint8_t>(0x80 | (cp & 0x3F)));
  } else {
    put_byte(static_cast<std::uint8_t>(0xF0 | cp >> 18));
    put_byte(static_cast<std::uint8_t>(0x80 | (cp >> 12 & 0x3F)));
    put_byte(static_cast<std::uint8_t>(0x80 | (cp >> 6 & 0x3F)));
    put_byte(static_cast<std::uint8_t>(0x80 | (cp & 0x3F)));
  }
}

void type_scanner::put_byte(std::uint8_t b) noexcept {
  switch (role_) {
    case role::key: {
      if (key_differs_) return;
      const std::string& token = pointer_->tokens[depth_ - 1];
      if (key_at_ < token.size() && static_cast<std::uint8_t>(token[key_at_]) == b) {
        ++key_at_;
      } else {
        key_differs_ = true;
      }
      return;
    }
    case role::target:
      if (value_size_ < max_value) {
        value_[value_size_++] = static_cast<char>(b);
      } else {
        value_long_ = true;
      }
      return;
    case role::skip:
      return;
  }
}

}  // namespace tollgate::protocol::ws
