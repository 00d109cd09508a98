#pragma once
/// The bytes of the state file (docs/design.md §18, app/state_file.hpp): fixed-width little-endian
/// integers and length-prefixed strings, written into a string and read back with bounds. A
/// reader that meets a short or impossible field fails for good (ok() false) and every later
/// read gives zeros, so callers check once at the end of a record.

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace tollgate::core {

/// Appends fields to `out`.
class state_writer {
 public:
  explicit state_writer(std::string& out) : out_(out) {}
  void u8(std::uint8_t v) { out_ += static_cast<char>(v); }
  void u32(std::uint32_t v) { put(v, 4); }
  void u64(std::uint64_t v) { put(v, 8); }
  void i64(std::int64_t v) { put(static_cast<std::uint64_t>(v), 8); }
  /// A length (u32) and the bytes.
  void text(std::string_view s) {
    u32(static_cast<std::uint32_t>(s.size()));
    out_ += s;
  }
  std::string& out() noexcept { return out_; }

 private:
  void put(std::uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i)
      out_ += static_cast<char>(v >> (8 * i) & 0xff);
  }
  std::string& out_;
};

/// Writes the records `each(writer)` writes for every entry `for_each` visits, after their
/// number: a table that changes while it is saved (workers keep serving) still gets a count
/// that matches what follows.
template <class ForEach, class Each>
void write_counted(state_writer& w, ForEach&& for_each, Each&& each) {
  std::string body;
  state_writer b(body);
  std::uint32_t n = 0;
  for_each([&](const auto&... entry) {
    each(b, entry...);
    ++n;
  });
  w.u32(n);
  w.out() += body;
}

/// Reads fields from `in`, never past its end.
class state_reader {
 public:
  explicit state_reader(std::string_view in) : in_(in) {}
  std::uint8_t u8() { return static_cast<std::uint8_t>(take(1)); }
  std::uint32_t u32() { return static_cast<std::uint32_t>(take(4)); }
  std::uint64_t u64() { return take(8); }
  std::int64_t i64() { return static_cast<std::int64_t>(take(8)); }
  /// A string of at most `max` bytes (longer: a failure).
  std::string_view text(std::size_t max) {
    const std::uint32_t n = u32();
    if (!ok_ || n > max || n > in_.size()) return fail();
    const std::string_view s = in_.substr(0, n);
    in_.remove_prefix(n);
    return s;
  }
  /// A count of records, each at least `min_bytes` long: more than the bytes left could hold
  /// is a failure (a count cannot make the reader reserve memory the input does not back).
  std::uint32_t count(std::size_t min_bytes) {
    const std::uint32_t n = u32();
    if (ok_ && min_bytes > 0 && n > in_.size() / min_bytes) {
      fail();
      return 0;
    }
    return ok_ ? n : 0;
  }
  /// Takes `n` bytes as they are.
  std::string_view bytes(std::size_t n) {
    if (!ok_ || n > in_.size()) return fail();
    const std::string_view s = in_.substr(0, n);
    in_.remove_prefix(n);
    return s;
  }
  /// Marks the input as malformed (a value out of its range).
  std::string_view fail() {
    ok_ = false;
    in_ = {};
    return {};
  }
  bool ok() const noexcept { return ok_; }
  bool done() const noexcept { return in_.empty(); }
  std::size_t left() const noexcept { return in_.size(); }

 private:
  std::uint64_t take(std::size_t bytes) {
    if (!ok_ || in_.size() < bytes) {
      fail();
      return 0;
    }
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < bytes; ++i)
      v |= std::uint64_t{static_cast<unsigned char>(in_[i])} << (8 * i);
    in_.remove_prefix(bytes);
    return v;
  }
  std::string_view in_;
  bool ok_ = true;
};

}  // namespace tollgate::core
