#pragma once
/// The parsers of the data path, whose header fields live in a per-connection arena: a request
/// and its response allocate their fields from a block the connection reuses, instead of one
/// heap allocation per field. Internal to net/.

#include <chrono>
#include <cstddef>
#include <new>
#include <string_view>

#include "gateway/core/clock.hpp"
#include "gateway/net/asio.hpp"

namespace tollgate::net {

/// Memory handed out in order from one block and taken back all at once. What does not fit
/// comes from the heap and goes back to it.
/// Thread safety: none; one connection's.
class field_arena {
 public:
  void* allocate(std::size_t n, std::size_t align) {
    const std::size_t at = (used_ + align - 1) & ~(align - 1);
    if (align <= alignof(std::max_align_t) && at + n <= sizeof block_) {
      used_ = at + n;
      return block_ + at;
    }
    return ::operator new(n, std::align_val_t(align));
  }
  void deallocate(void* p, std::size_t /*n*/, std::size_t align) noexcept {
    const auto* c = static_cast<const std::byte*>(p);
    if (c >= block_ && c < block_ + sizeof block_) return;  // taken back by reset()
    // The unsized form: clang 14 declares the sized aligned one only with -fsized-deallocation.
    ::operator delete(p, std::align_val_t(align));
  }
  /// Takes back the whole block. Only when nothing allocated from it is alive.
  void reset() noexcept { used_ = 0; }

 private:
  alignas(std::max_align_t) std::byte block_[8192];
  std::size_t used_ = 0;
};

/// An allocator drawing on a field_arena; default-constructed, it uses the heap.
template <class T>
class arena_allocator {
 public:
  using value_type = T;
  arena_allocator() noexcept = default;
  explicit arena_allocator(field_arena& a) noexcept : arena_(&a) {}
  template <class U>
  arena_allocator(const arena_allocator<U>& other) noexcept : arena_(other.arena()) {}

  T* allocate(std::size_t n) {
    if (arena_ == nullptr) return std::allocator<T>().allocate(n);
    return static_cast<T*>(arena_->allocate(n * sizeof(T), alignof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (arena_ == nullptr) return std::allocator<T>().deallocate(p, n);
    arena_->deallocate(p, n * sizeof(T), alignof(T));
  }
  field_arena* arena() const noexcept { return arena_; }
  template <class U>
  bool operator==(const arena_allocator<U>& o) const noexcept {
    return arena_ == o.arena();
  }

 private:
  field_arena* arena_ = nullptr;
};

using fields = http::basic_fields<arena_allocator<char>>;
using request_parser = http::request_parser<http::buffer_body, arena_allocator<char>>;
using response_parser = http::response_parser<http::buffer_body, arena_allocator<char>>;

/// The constructor arguments of a parser whose fields come from `a`.
inline auto on_arena(field_arena& a) {
  return std::make_tuple(std::piecewise_construct, std::make_tuple(),
                         std::make_tuple(arena_allocator<char>(a)));
}

/// Beast's string view as a standard one.
inline std::string_view sv(beast::string_view s) noexcept {
  return {s.data(), s.size()};
}

/// Feeds bytes already in `buffer` to `parser` without I/O: an awaited read that completes at
/// once still costs a trip through the scheduler. Returns true when the parser advanced (or is
/// done); false when it needs more input; errors other than "need more / need buffer" are
/// stored in `ec`.
template <bool isRequest, class Body, class Allocator>
bool parse_buffered(http::parser<isRequest, Body, Allocator>& parser, beast::flat_buffer& buffer,
                    error_code& ec) {
  ec = {};
  if (buffer.size() == 0) return false;
  const std::size_t used = parser.put(buffer.data(), ec);
  buffer.consume(used);
  if (ec == http::error::need_more || ec == http::error::need_buffer) ec = {};
  return used > 0 || parser.is_done();
}

}  // namespace tollgate::net
