#pragma once
/// The type of a WebSocket message (docs/design.md §19): the string a JSON pointer (RFC 6901)
/// names in a text message, found by a streaming scanner that reads the message's bytes as the
/// relay sees them, in pieces however reads cut them, and never builds a document. It keeps one
/// bit per open container (at most max_depth), the pointer's progress and the value read so far
/// (at most max_value bytes): a few hundred bytes, however long or hostile the message.
///
/// What it reads is a prefix of the message: the type is known as soon as the value's closing
/// quote is read, whatever follows. Before that, anything that is not JSON (a stray byte, a
/// missing comma, a control character in a string, a lone surrogate, nesting deeper than
/// max_depth) ends the scan with no type; so does a value that is not a string, or the end of
/// the message. Of two equal keys the first one on the pointer's path that holds the value
/// wins. The caller stops feeding at its scan limit (the relay, once message types are wired into
/// it: issue 27). No I/O, no allocation.

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "gateway/core/json_pointer.hpp"

namespace tollgate::protocol::ws {

using core::json_pointer;

/// Finds the string at a pointer in a document fed in pieces.
/// Thread safety: none; one message of one connection at a time (reset() between messages).
class type_scanner {
 public:
  /// Where a scan stands.
  enum class state : std::uint8_t {
    scanning,  ///< more bytes may tell
    found,     ///< the value is a string: value()
    absent     ///< no string there, or not JSON: the message's type is `default`
  };
  /// Most nesting followed; deeper is treated as not JSON.
  static constexpr std::uint32_t max_depth = 128;
  /// Most bytes of a value kept: a longer string is found but names no type (value() "").
  static constexpr std::size_t max_value = 64;

  /// A scanner for `pointer`, which must outlive it.
  explicit type_scanner(const json_pointer& pointer) noexcept : pointer_(&pointer) {}

  /// Starts a new message.
  void reset() noexcept;
  /// Reads `bytes`, the message's next (unmasked) bytes; stops reading once the scan is over.
  /// Returns where it stands after them.
  state feed(std::span<const std::uint8_t> bytes) noexcept;
  /// The message has ended: a scan still going finds nothing.
  state finish() noexcept;
  state where() const noexcept { return state_; }
  /// The string found (decoded); "" when it was longer than max_value.
  std::string_view value() const noexcept {
    return value_long_ ? std::string_view() : std::string_view(value_.data(), value_size_);
  }

 private:
  /// What the lexer expects next.
  enum class lex : std::uint8_t {
    value,          ///< a value (the document's, after ':' or an array's ',')
    first_element,  ///< after '[': a value or ']'
    first_key,      ///< after '{': a key or '}'
    key,            ///< after an object's ',': a key
    colon,          ///< after a key
    after_value,    ///< ',' or the container's end
    string,         ///< inside a string
    literal,        ///< inside true, false, null or a number
    done            ///< the top-level value has ended
  };
  /// What the string being read is.
  enum class role : std::uint8_t { skip, key, target };

  /// Ends the scan with no type; false.
  bool fail() noexcept {
    state_ = state::absent;
    return false;
  }
  bool step(std::uint8_t c) noexcept;  ///< false: the scan is over
  bool begin_value(std::uint8_t c) noexcept;
  bool string_byte(std::uint8_t c) noexcept;
  bool string_end() noexcept;
  void put(std::uint32_t code_point) noexcept;  ///< a decoded character of the string
  void put_byte(std::uint8_t b) noexcept;
  bool in_array() const noexcept { return (kinds_[(depth_ - 1) / 64] >> ((depth_ - 1) % 64)) & 1; }
  /// After the current container's member or element selector: whether the value that
  /// follows is on the pointer's path.
  bool selector_matches() const noexcept;
  void end_value() noexcept;

  const json_pointer* pointer_;
  state state_ = state::scanning;
  lex lex_ = lex::value;
  role role_ = role::skip;
  std::uint32_t depth_ = 0;    ///< open containers
  std::uint32_t matched_ = 0;  ///< of them, those on the pointer's path (from the outside)
  /// Per depth up to max_tokens: the current element's index, in an on-path array.
  std::array<std::uint64_t, json_pointer::max_tokens + 1> indexes_{};
  bool next_on_path_ = false;                          ///< the value about to start is on the path
  std::array<std::uint64_t, max_depth / 64> kinds_{};  ///< per level: 1 array, 0 object
  // The string being read.
  bool in_key_ = false;                  ///< an object's key, else a value
  bool escape_ = false;                  ///< after a backslash
  std::uint8_t hex_left_ = 0;            ///< \u: hex digits still to come
  std::uint32_t unit_ = 0;               ///< \u: the code unit so far
  std::uint32_t high_ = 0;               ///< a high surrogate waiting for its low half
  std::size_t key_at_ = 0;               ///< key: bytes compared with the token so far
  bool key_differs_ = false;             ///< key: not the token
  std::array<char, max_value> value_{};  ///< target: the value so far
  std::size_t value_size_ = 0;
  bool value_long_ = false;
  // A literal being read.
  std::string_view literal_rest_;  ///< true/false/null: the letters still to come
  bool number_ = false;            ///< a number: digits and . e E + - until a delimiter
};

}  // namespace tollgate::protocol::ws
