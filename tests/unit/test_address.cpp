#include <catch2/catch.hpp>

#include "gateway/limit/address.hpp"

using namespace tollgate::limit;

TEST_CASE("IPv4 addresses parse and print", "[address]") {
  const auto a = address::parse("192.0.2.33").value();
  CHECK(a.family() == family::v4);
  CHECK(a.v4() == 0xc0000221u);
  CHECK(a.to_string() == "192.0.2.33");
  CHECK(address::parse("0.0.0.0")->v4() == 0u);
  CHECK(address::parse("255.255.255.255")->v4() == 0xffffffffu);
}

TEST_CASE("IPv6 addresses parse and print canonically", "[address]") {
  const auto a = address::parse("2001:DB8:0:0:1::1").value();
  CHECK(a.family() == family::v6);
  CHECK(a.v6_high() == 0x20010db800000000ull);
  CHECK(a.v6_low() == 0x0001000000000001ull);
  CHECK(a.to_string() == "2001:db8::1:0:0:1");

  const auto any = address::parse("::").value();
  CHECK(any.family() == family::v6);
  CHECK(any.v6_high() == 0);
  CHECK(any.v6_low() == 0);
  CHECK(any.to_string() == "::");

  const auto link_local = address::parse("fe80::1").value();
  CHECK(link_local.family() == family::v6);
  CHECK(link_local.v6_high() == 0xfe80000000000000ull);
  CHECK(address::parse("::1")->v6_low() == 1);
}

TEST_CASE("IPv4-mapped IPv6 counts as IPv4", "[address]") {
  const auto mapped = address::parse("::ffff:198.51.100.7").value();
  CHECK(mapped.family() == family::v4);
  CHECK(mapped == address::parse("198.51.100.7").value());
  CHECK(address::parse("::FFFF:c633:6407").value() == address::parse("198.51.100.7").value());
  // IPv4-compatible (deprecated, ::a.b.c.d) and NAT64 are different addresses: they stay IPv6.
  CHECK(address::parse("::198.51.100.7")->family() == family::v6);
  CHECK(address::parse("64:ff9b::198.51.100.7")->family() == family::v6);
}

TEST_CASE("malformed addresses are rejected", "[address]") {
  for (const char* bad : {"",
                          " ",
                          "1.2.3",
                          "1.2.3.4.5",
                          "256.1.1.1",
                          "01.2.3.4",
                          "1.2.3.4 ",
                          " 1.2.3.4",
                          "0x1.2.3.4",
                          "1.2.3.-4",
                          "1:2:3:4:5:6:7:8:9",
                          "2001:db8:::1",
                          "fe80::1%eth0",
                          "[::1]",
                          "1.2.3.4:80",
                          "::ffff:1.2.3",
                          "gggg::1",
                          "abc",
                          "1.2.3.4/24",
                          "0000:0000:0000:0000:0000:0000:0000:0000:0000"}) {
    INFO(bad);
    CHECK_FALSE(address::parse(bad));
  }
  // Embedded NUL must not cut the text short.
  CHECK_FALSE(address::parse(std::string_view("1.2.3.4\0junk", 12)));
}

TEST_CASE("addresses reduce to one key per level", "[address]") {
  const level_prefixes defaults;
  const auto v4 = keys_of(address::parse("203.0.113.77").value(), defaults);
  CHECK(v4.fine == level::ipv4_individual);
  CHECK(v4.coarse == level::ipv4_network);
  CHECK(v4.fine_key == 0xcb00714dull);
  CHECK(v4.coarse_key == 0xcb007100ull);
  CHECK(key_to_string(level::ipv4_network, v4.coarse_key, defaults) == "203.0.113.0/24");

  const auto v6 = keys_of(address::parse("2001:db8:1234:5678:9abc::1").value(), defaults);
  CHECK(v6.fine == level::ipv6_subnet);
  CHECK(v6.coarse == level::ipv6_provider);
  CHECK(v6.fine_key == 0x20010db812345678ull);
  CHECK(v6.coarse_key == 0x20010db812340000ull);
  CHECK(key_to_string(level::ipv6_provider, v6.coarse_key, defaults) == "2001:db8:1234::/48");

  // Same /24, different /32: the network key is shared, the individual key is not.
  const auto other = keys_of(address::parse("203.0.113.200").value(), defaults);
  CHECK(other.coarse_key == v4.coarse_key);
  CHECK(other.fine_key != v4.fine_key);
}

TEST_CASE("prefix lengths are configurable", "[address]") {
  level_prefixes p;
  p.ipv4_individual = 30;
  p.ipv4_network = 16;
  p.ipv6_subnet = 56;
  p.ipv6_provider = 32;
  const auto v4 = keys_of(address::parse("10.20.30.47").value(), p);
  CHECK(v4.fine_key == 0x0a141e2cull);
  CHECK(v4.coarse_key == 0x0a140000ull);
  const auto v6 = keys_of(address::parse("2001:db8:aaaa:bbff::").value(), p);
  CHECK(v6.fine_key == 0x20010db8aaaabb00ull);
  CHECK(v6.coarse_key == 0x20010db800000000ull);
  p.ipv4_network = 1;
  CHECK(keys_of(address::parse("200.1.1.1").value(), p).coarse_key == 0x80000000ull);
}

TEST_CASE("CIDR blocks parse strictly and match their family", "[address][cidr]") {
  using tollgate::core::cidr;
  const auto ten = cidr::parse("10.0.0.0/8").value();
  CHECK(ten.contains(address::parse("10.255.1.2").value()));
  CHECK_FALSE(ten.contains(address::parse("11.0.0.1").value()));
  CHECK(ten.contains(address::parse("::ffff:10.9.9.9").value()));  // mapped counts as IPv4
  CHECK_FALSE(ten.contains(address::parse("::a00:1").value()));
  CHECK(ten.to_string() == "10.0.0.0/8");

  const auto one = cidr::parse("192.0.2.7").value();  // a bare address is a block of one
  CHECK(one.contains(address::parse("192.0.2.7").value()));
  CHECK_FALSE(one.contains(address::parse("192.0.2.8").value()));
  CHECK(one.to_string() == "192.0.2.7/32");

  const auto v6 = cidr::parse("2001:db8::/32").value();
  CHECK(v6.contains(address::parse("2001:db8:ffff::1").value()));
  CHECK_FALSE(v6.contains(address::parse("2001:db9::1").value()));
  CHECK_FALSE(v6.contains(address::parse("32.1.13.184").value()));
  const auto v6_long = cidr::parse("2001:db8::1:0/112").value();
  CHECK(v6_long.contains(address::parse("2001:db8::1:ffff").value()));
  CHECK_FALSE(v6_long.contains(address::parse("2001:db8::2:0").value()));
  CHECK(cidr::parse("::ffff:10.0.0.0/104")->to_string() == "10.0.0.0/8");
  CHECK(cidr::parse("0.0.0.0/0")->contains(address::parse("203.0.113.9").value()));
  CHECK(cidr::parse("::/0")->contains(address::parse("2001:db8::1").value()));

  for (const char* bad : {"", "10.0.0.0/", "10.0.0.0/33", "10.1.2.3/8", "10.0.0.0/-1",
                          "10.0.0.0/8/8", "2001:db8::/129", "2001:db8::1/32", "10.0.0.0/ 8",
                          "::ffff:10.0.0.0/64", "10.0.0.0/0008", "example.com/8"}) {
    INFO(bad);
    CHECK_FALSE(cidr::parse(bad));
  }
}
