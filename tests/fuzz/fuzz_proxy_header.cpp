/// Fuzz target: the PROXY protocol v1/v2 parser (gateway/policy/proxy_header.*), on the first
/// bytes of a connection as they arrive.
///
/// Input: the connection's first bytes. Checked: the parser never reads past what it is given
/// (every call gets a copy of exactly that many bytes, so ASan sees an over-read); `done` has
/// a length within the input and at most max_proxy_header; every shorter prefix of a complete
/// header is need_more; the header alone parses to the same result as the header with the
/// bytes after it; no prefix of an invalid input is complete, and once a prefix is invalid,
/// every longer one is.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "gateway/protocol/proxy_header.hpp"

namespace {

using namespace tollgate::protocol;

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_proxy_header: %s\n", what);
  std::abort();
}

/// Parses the first `n` bytes of `data` from a heap block of exactly `n` bytes.
proxy_parse parse_exact(const std::uint8_t* data, std::size_t n, proxy_header& out) {
  const std::vector<char> copy(data, data + n);
  return parse_proxy_header({copy.data(), copy.size()}, out);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  proxy_header whole;
  const proxy_parse result = parse_exact(data, size, whole);
  if (result == proxy_parse::need_more) return 0;

  if (result == proxy_parse::invalid) {
    // The connection is dropped at the first read that makes it invalid: no shorter input may
    // have been complete, and once invalid, more bytes must not make it valid again.
    bool seen_invalid = false;
    for (std::size_t n = 0; n < size && n <= max_proxy_header; ++n) {
      proxy_header h;
      const proxy_parse r = parse_exact(data, n, h);
      require(r != proxy_parse::done, "a prefix of an invalid input is a complete header");
      require(!seen_invalid || r == proxy_parse::invalid,
              "an invalid input turns valid with more bytes");
      seen_invalid = r == proxy_parse::invalid;
    }
    return 0;
  }

  require(whole.length > 0 && whole.length <= size, "done with a length outside the input");
  require(whole.length <= max_proxy_header, "done with a header longer than max_proxy_header");
  for (std::size_t n = 0; n < whole.length; ++n) {
    proxy_header h;
    require(parse_exact(data, n, h) == proxy_parse::need_more,
            "a prefix of a complete header is not need_more");
  }
  proxy_header alone;
  require(parse_exact(data, whole.length, alone) == proxy_parse::done,
          "the header without the bytes after it is not done");
  require(alone.length == whole.length && alone.source == whole.source,
          "the bytes after the header change what it says");
  return 0;
}
