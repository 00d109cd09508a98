#include <catch2/catch.hpp>

#include <string>

#include "gateway/protocol/proxy_header.hpp"

using namespace tollgate;
using protocol::parse_proxy_header;
using protocol::proxy_parse;

namespace {

std::string v2(unsigned char command, unsigned char family, const std::string& body) {
  std::string h("\r\n\r\n\0\r\nQUIT\n", 12);
  h += static_cast<char>(0x20 | command);
  h += static_cast<char>(family);
  h += static_cast<char>(body.size() >> 8);
  h += static_cast<char>(body.size() & 0xff);
  return h + body;
}

std::string bytes(std::initializer_list<int> b) {
  std::string s;
  for (const int c : b)
    s += static_cast<char>(c);
  return s;
}

}  // namespace

TEST_CASE("PROXY v1 lines give the client's address and their length", "[proxy]") {
  protocol::proxy_header h;
  const std::string line = "PROXY TCP4 203.0.113.7 192.0.2.1 51234 443\r\n";
  REQUIRE(parse_proxy_header(line + "GET / HTTP/1.1\r\n", h) == proxy_parse::done);
  CHECK(h.length == line.size());
  CHECK(h.source->to_string() == "203.0.113.7");

  REQUIRE(parse_proxy_header("PROXY TCP6 2001:db8::5 2001:db8::1 1 65535\r\n", h) ==
          proxy_parse::done);
  CHECK(h.source->to_string() == "2001:db8::5");
  // UNKNOWN: the connection's own peer stands.
  REQUIRE(parse_proxy_header("PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n", h) == proxy_parse::done);
  CHECK(!h.source);
  CHECK(h.length == 35);
}

TEST_CASE("PROXY v1 prefixes ask for more, malformed lines are invalid", "[proxy]") {
  protocol::proxy_header h;
  for (const char* partial : {"P", "PROX", "PROXY ", "PROXY TCP4 203.0.113.7 192.0.2.1 5"}) {
    INFO(partial);
    CHECK(parse_proxy_header(partial, h) == proxy_parse::need_more);
  }
  for (const char* bad : {
           "GET / HTTP/1.1\r\n",                      // no header at all
           "PROXI TCP4 1.2.3.4 1.2.3.5 1 2\r\n",      // wrong word
           "PROXY TCP4 1.2.3.4 1.2.3.5 1\r\n",        // a field missing
           "PROXY TCP4 1.2.3.4 1.2.3.5 1 2 3\r\n",    // one too many
           "PROXY TCP4 2001:db8::1 1.2.3.5 1 2\r\n",  // family mismatch
           "PROXY TCP6 1.2.3.4 2001:db8::1 1 2\r\n",  // family mismatch
           "PROXY TCP4 1.2.3.999 1.2.3.5 1 2\r\n",    // not an address
           "PROXY TCP4 1.2.3.4 1.2.3.5 65536 2\r\n",  // port out of range
           "PROXY TCP4 1.2.3.4 1.2.3.5 01 2\r\n",     // leading zero
           "PROXY UDP4 1.2.3.4 1.2.3.5 1 2\r\n",      // not TCP
       }) {
    INFO(bad);
    CHECK(parse_proxy_header(bad, h) == proxy_parse::invalid);
  }
  // No CRLF within the 107 bytes a v1 line may take.
  CHECK(parse_proxy_header("PROXY TCP4 " + std::string(120, '1'), h) == proxy_parse::invalid);
}

TEST_CASE("PROXY v2 headers: IPv4, IPv6, LOCAL, TLVs, partial and malformed", "[proxy]") {
  protocol::proxy_header h;
  const std::string v4 = v2(1, 0x11, bytes({203, 0, 113, 7, 192, 0, 2, 1, 0xc8, 0x22, 1, 0xbb}));
  REQUIRE(parse_proxy_header(v4 + "GET /", h) == proxy_parse::done);
  CHECK(h.length == 28);
  CHECK(h.source->to_string() == "203.0.113.7");
  // Every shorter prefix asks for more.
  for (std::size_t n = 1; n < v4.size(); ++n) {
    INFO(n);
    CHECK(parse_proxy_header(v4.substr(0, n), h) == proxy_parse::need_more);
  }

  std::string six = bytes({0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x05});
  six += std::string(16, '\0') + bytes({0, 1, 0, 2});
  REQUIRE(parse_proxy_header(v2(1, 0x21, six), h) == proxy_parse::done);
  CHECK(h.source->to_string() == "2001:db8::5");

  // TLVs after the addresses are skipped with the header.
  const std::string tlv = bytes({203, 0, 113, 8, 192, 0, 2, 1, 0, 1, 0, 2, 0x04, 0, 2, 'h', 'i'});
  REQUIRE(parse_proxy_header(v2(1, 0x11, tlv), h) == proxy_parse::done);
  CHECK(h.length == 16 + tlv.size());
  CHECK(h.source->to_string() == "203.0.113.8");

  // LOCAL (the balancer's own health check) and UNSPEC: the peer stands.
  REQUIRE(parse_proxy_header(v2(0, 0x00, ""), h) == proxy_parse::done);
  CHECK(!h.source);
  REQUIRE(parse_proxy_header(v2(1, 0x00, ""), h) == proxy_parse::done);
  CHECK(!h.source);

  std::string wrong_version = v4;
  wrong_version[12] = 0x11;
  CHECK(parse_proxy_header(wrong_version, h) == proxy_parse::invalid);
  std::string bad_command = v4;
  bad_command[12] = 0x22;
  CHECK(parse_proxy_header(bad_command, h) == proxy_parse::invalid);
  // No such family or transport.
  CHECK(parse_proxy_header(v2(1, 0x41, std::string(12, '\1')), h) == proxy_parse::invalid);
  CHECK(parse_proxy_header(v2(1, 0x13, std::string(12, '\1')), h) == proxy_parse::invalid);
  // UNIX sockets (family 3): the peer stands.
  REQUIRE(parse_proxy_header(v2(1, 0x31, std::string(216, '\0')), h) == proxy_parse::done);
  CHECK(!h.source);
  // Addresses shorter than the family needs.
  CHECK(parse_proxy_header(v2(1, 0x11, bytes({1, 2, 3})), h) == proxy_parse::invalid);
  // A header longer than the gateway accepts.
  CHECK(parse_proxy_header(v2(1, 0x11, std::string(2000, 'x')), h) == proxy_parse::invalid);
  // A broken signature.
  std::string sig = v4;
  sig[5] = 'x';
  CHECK(parse_proxy_header(sig, h) == proxy_parse::invalid);
}
