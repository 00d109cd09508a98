/// Fuzz target: what the Redis store makes of bytes from Redis (gateway/store/redis_wire.*).
/// Bytes go through hiredis's reader, bounded as the store bounds it, fed in two pieces split
/// where the first byte says; every reply read is then given to each of the store's readers:
/// the script's reply for a request of three groups (all of them, and the first alone, as a
/// Cluster part), a CLUSTER SLOTS map, and a redirection in an error or status text.
///
/// Checked: nothing reads out of bounds (ASan); a script reply accepted gives one outcome per
/// configured tier, a positive wait exactly for the tiers it rejects, tats no earlier than
/// now, and a binding tier that exists; slot ranges are ordered within 0..16383 with a port
/// and a host; a redirection names a slot below 16384, a port and a host.

#include <hiredis/hiredis.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "gateway/store/redis_wire.hpp"

namespace {

namespace redis = tollgate::store::redis;
namespace limit = tollgate::limit;

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_redis_replies: %s\n", what);
  std::abort();
}

/// Three limits: short+long, short only, a shadowed long only.
struct request_fixture {
  limit::limit_spec a, b, c;
  limit::limit_request req;
  request_fixture() {
    a.tiers = {limit::make_params({10, 1'000'000'000}, 5),
               limit::make_params({100, 3'600'000'000'000}, 50)};
    b.tiers = {limit::make_params({1, 1'000'000'000}, 3), limit::gcra_params{}};
    b.source = limit::key_source::global;
    c.tiers = {limit::gcra_params{}, limit::make_params({7, 60'000'000'000}, 1'000'000)};
    c.source = limit::key_source::header;
    c.shadow = true;
    req.groups[0] = {&a, 0xc0000201};
    req.groups[1] = {&b, 0};
    req.groups[2] = {&c, 42};
    req.group_count = 3;
    req.cost = 1;
    req.now = 1'700'000'000'000'000'000;
  }
};

void check_decision(const request_fixture& f, const redisReply& r) {
  limit::decision d;
  if (!redis::decode_decision(r, f.req, d)) return;
  require(d.count == 4, "one outcome per configured tier");
  for (std::uint8_t i = 0; i < d.count; ++i) {
    const auto& o = d.limits[i];
    require(o.group < f.req.group_count, "outcome of a group the request has");
    require(o.tat >= f.req.now, "tat before now");
    require(o.wait >= 0, "negative wait");
  }
  require(!d.shadow_limited || d.admitted, "shadow_limited without admission");
  require(d.binding == limit::no_binding || d.binding < d.count, "binding out of range");
  redis::script_reply part;
  redis::read_reply(r, f.req, 1, part);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const request_fixture fixture;
  if (size == 0) return 0;
  const std::size_t split = data[0] % size;
  const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  const redis::reader_ptr owned = redis::make_reader();
  redisReader* reader = owned.get();
  bool ok = redisReaderFeed(reader, bytes.data(), split) == REDIS_OK &&
            redisReaderFeed(reader, bytes.data() + split, bytes.size() - split) == REDIS_OK;
  for (int n = 0; ok && n < 64; ++n) {
    void* p = nullptr;
    if (redisReaderGetReply(reader, &p) != REDIS_OK || p == nullptr) break;
    const auto* r = static_cast<const redisReply*>(p);
    check_decision(fixture, *r);
    for (const auto& range : redis::parse_slot_map(*r, "asked")) {
      require(range.first <= range.last && range.last <= 16383, "slot range out of order");
      require(range.port != 0 && !range.host.empty(), "slot range without a node");
    }
    if ((r->type == REDIS_REPLY_ERROR || r->type == REDIS_REPLY_STATUS ||
         r->type == REDIS_REPLY_STRING) &&
        r->str != nullptr) {
      const std::string_view text(r->str, r->len);
      if (const auto to = redis::parse_redirect(text)) {
        require(to->slot <= 16383 && to->port != 0 && !to->host.empty(), "redirection to nowhere");
      }
      (void)redis::error_kind(text);
    }
  }
  return 0;
}
