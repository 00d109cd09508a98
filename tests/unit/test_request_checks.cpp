// Checks of request heads that Beast's parser leaves to the server (RFC 9112 §3.2, §6.3).

#include <catch2/catch.hpp>

#include "gateway/protocol/request_checks.hpp"

using tollgate::protocol::acceptable_transfer_encoding;
using tollgate::protocol::valid_host;

TEST_CASE("Host values: names, addresses, literals and ports pass", "[request_checks]") {
  for (const char* ok :
       {"", "example.com", "example.com:8080", "EXAMPLE.com", "a-b.c_d~e", "127.0.0.1",
        "127.0.0.1:80", "[::1]", "[::1]:443", "[2001:db8::1]:8080", "xn--bcher-kva.example",
        "host:", "%41bc", "a!$&'()*+,;=b", "[v7.fe80::1]"}) {
    INFO(ok);
    CHECK(valid_host(ok));
  }
}

TEST_CASE("Host values: what cannot be a host is refused", "[request_checks]") {
  for (const char* bad :
       {"a b",      "a/b",  "user@host", "a?b",        "a#b",  "a:80:80", "a:port",
        "a:123456", "[::1", "[::1]x",    "[::1]:8o",   "[]",   "[a b]",   "%4",
        "%zz",      "a\tb", "\x01",      "host\\evil", "a\"b", "<a>",     "a%"}) {
    INFO(bad);
    CHECK_FALSE(valid_host(bad));
  }
}

TEST_CASE("Transfer-Encoding: absent or ending in chunked", "[request_checks]") {
  CHECK(acceptable_transfer_encoding(false, false));
  CHECK(acceptable_transfer_encoding(true, true));
  CHECK_FALSE(acceptable_transfer_encoding(true, false));  // gzip, "chunked, identity", xchunked
}
