#include <catch2/catch.hpp>

#include <vector>

#include "gateway/policy/client_address.hpp"

using namespace tollgate;

namespace {
std::string decide(const char* peer, std::vector<std::string_view> xff,
                   std::vector<const char*> trusted) {
  std::vector<core::cidr> t;
  for (const char* c : trusted)
    t.push_back(core::cidr::parse(c).value());
  return policy::client_address(core::address::parse(peer).value(), xff, t).to_string();
}
}  // namespace

TEST_CASE("X-Forwarded-For is believed only from trusted proxies", "[client]") {
  // No trusted proxies: the peer, whatever the header says.
  CHECK(decide("198.51.100.7", {"203.0.113.1"}, {}) == "198.51.100.7");
  // Untrusted peer: header ignored.
  CHECK(decide("198.51.100.7", {"203.0.113.1"}, {"10.0.0.0/8"}) == "198.51.100.7");
  // Trusted peer: the rightmost entry.
  CHECK(decide("10.0.0.2", {"203.0.113.1"}, {"10.0.0.0/8"}) == "203.0.113.1");
  // Walk right to left past trusted hops; a client-supplied left part is not believed.
  CHECK(decide("10.0.0.2", {"1.1.1.1, 203.0.113.1, 10.0.0.9"}, {"10.0.0.0/8"}) == "203.0.113.1");
  // Several fields are one list, in order.
  CHECK(decide("10.0.0.2", {"1.1.1.1", "203.0.113.1, 10.0.0.9"}, {"10.0.0.0/8"}) == "203.0.113.1");
  CHECK(decide("10.0.0.2", {"203.0.113.5", "10.0.0.9"}, {"10.0.0.0/8"}) == "203.0.113.5");
  // Every hop trusted: the leftmost.
  CHECK(decide("10.0.0.2", {"10.1.1.1, 10.0.0.9"}, {"10.0.0.0/8"}) == "10.1.1.1");
  // Garbage stops the walk at the last trusted hop.
  CHECK(decide("10.0.0.2", {"203.0.113.1, nonsense, 10.0.0.9"}, {"10.0.0.0/8"}) == "10.0.0.9");
  CHECK(decide("10.0.0.2", {"unknown"}, {"10.0.0.0/8"}) == "10.0.0.2");
  // Several fields are one list, so an empty element is garbage wherever it is (found by
  // fuzzing: fields ["a", ",b"] and ["a", "", "b"] walked on to a; the list "a,,b" stops at b).
  CHECK(decide("10.0.0.2", {"203.0.113.1,, 10.0.0.9"}, {"10.0.0.0/8"}) == "10.0.0.9");
  CHECK(decide("10.0.0.2", {"203.0.113.1", ", 10.0.0.9"}, {"10.0.0.0/8"}) == "10.0.0.9");
  CHECK(decide("10.0.0.2", {"203.0.113.1", "", "10.0.0.9"}, {"10.0.0.0/8"}) == "10.0.0.9");
  // IPv6 and mapped addresses.
  CHECK(decide("::1", {" 2001:db8::5 "}, {"::1/128"}) == "2001:db8::5");
  CHECK(decide("::ffff:10.0.0.2", {"192.0.2.1"}, {"10.0.0.0/8"}) == "192.0.2.1");
  // Empty header from a trusted peer: the peer.
  CHECK(decide("10.0.0.2", {}, {"10.0.0.0/8"}) == "10.0.0.2");
}

TEST_CASE("X-Forwarded-For entries with a port name their address", "[client]") {
  // Some balancers write the client's port too (issue 21): once garbage, which made the proxy
  // the client of everyone behind it.
  CHECK(decide("10.0.0.2", {"203.0.113.1:5678"}, {"10.0.0.0/8"}) == "203.0.113.1");
  CHECK(decide("10.0.0.2", {"[2001:db8::1]:443"}, {"10.0.0.0/8"}) == "2001:db8::1");
  CHECK(decide("10.0.0.2", {"[2001:db8::1]"}, {"10.0.0.0/8"}) == "2001:db8::1");
  CHECK(decide("10.0.0.2", {"1.1.1.1:1, 10.0.0.9:80"}, {"10.0.0.0/8"}) == "1.1.1.1");
  CHECK(decide("10.0.0.2", {"203.0.113.1:5678, 10.0.0.9"}, {"10.0.0.0/8"}) == "203.0.113.1");
  // A bare IPv6 address is not read as one with a port.
  CHECK(decide("10.0.0.2", {"2001:db8::1:443"}, {"10.0.0.0/8"}) == "2001:db8::1:443");
  // What is not an address and a port is still garbage: the walk stops at the last trusted hop.
  for (const char* bad : {"203.0.113.1:", "203.0.113.1:123456", "203.0.113.1:65536",
                          "203.0.113.1:80x", "[2001:db8::1]443", "[2001:db8::1", "[203.0.113.1]:80",
                          "2001:db8::1]:443", "[2001:db8::1]:", "203.0.113.1:80:81"}) {
    INFO(bad);
    CHECK(decide("10.0.0.2", {bad, "10.0.0.9"}, {"10.0.0.0/8"}) == "10.0.0.9");
  }
}
