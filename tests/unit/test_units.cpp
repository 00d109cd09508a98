#include <catch2/catch.hpp>

#include "gateway/core/units.hpp"

using namespace tollgate::core;

TEST_CASE("rates parse as count per period", "[units]") {
  CHECK(parse_rate("2/s") == rate{2, ns_per_s});
  CHECK(parse_rate("30/m") == rate{30, 60 * ns_per_s});
  CHECK(parse_rate("5000/h") == rate{5000, 3600 * ns_per_s});
  CHECK(parse_rate("1000000000/s") == rate{1'000'000'000, ns_per_s});
  for (const char* bad : {"", "/s", "0/s", "2", "2/", "2/x", "2/ s", " 2/s", "-1/s", "2.5/s",
                          "1000000001/s", "2/sec", "2/S"}) {
    INFO(bad);
    CHECK_FALSE(parse_rate(bad));
  }
}

TEST_CASE("durations parse with their unit", "[units]") {
  CHECK(parse_duration("250ms") == 250 * ns_per_ms);
  CHECK(parse_duration("5s") == 5 * ns_per_s);
  CHECK(parse_duration("2m") == 120 * ns_per_s);
  CHECK(parse_duration("1h") == 3600 * ns_per_s);
  CHECK(parse_duration("1d") == 86400 * ns_per_s);
  CHECK(parse_duration("0s") == 0);
  CHECK(parse_duration("10us") == 10'000);
  for (const char* bad : {"", "5", "s", "5 s", "-5s", "5sec", "1.5s", "99999999999999999999h"}) {
    INFO(bad);
    CHECK_FALSE(parse_duration(bad));
  }
}

TEST_CASE("sizes parse in binary and decimal units", "[units]") {
  CHECK(parse_size("512") == 512u);
  CHECK(parse_size("16KiB") == 16u * 1024);
  CHECK(parse_size("1MiB") == 1u << 20);
  CHECK(parse_size("2GiB") == 2ull << 30);
  CHECK(parse_size("3KB") == 3000u);
  for (const char* bad : {"", "KiB", "1 KiB", "1kib", "1.5MiB", "-1"}) {
    INFO(bad);
    CHECK_FALSE(parse_size(bad));
  }
}

TEST_CASE("whole numbers respect their maximum", "[units]") {
  CHECK(parse_uint("0", 10) == 0u);
  CHECK(parse_uint("10", 10) == 10u);
  CHECK_FALSE(parse_uint("11", 10));
  CHECK_FALSE(parse_uint("7", 3));  // a digit past the bound (max - digit once wrapped)
  CHECK(parse_uint("3", 3) == 3u);
  CHECK_FALSE(parse_uint("9", 0));
  CHECK(parse_uint("18446744073709551615", UINT64_MAX) == UINT64_MAX);
  CHECK_FALSE(parse_uint("18446744073709551616", UINT64_MAX));
  CHECK_FALSE(parse_uint("+1", 10));
}

TEST_CASE("ceil_seconds rounds up", "[units]") {
  CHECK(ceil_seconds(0) == 0);
  CHECK(ceil_seconds(-5) == 0);
  CHECK(ceil_seconds(1) == 1);
  CHECK(ceil_seconds(ns_per_s) == 1);
  CHECK(ceil_seconds(ns_per_s + 1) == 2);
}
