// WebSocket frames as the relay sees them: headers parsed from raw bytes, the stream cut
// however reads split it, and the client meter's verdicts as tables of frames and instants.

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "gateway/protocol/websocket_frames.hpp"

using namespace tollgate;
using namespace tollgate::protocol::ws;

namespace {

using bytes = std::vector<std::uint8_t>;

/// A frame as a client sends it: `op`, `fin`, masked with a fixed key, `length` payload bytes.
bytes frame(std::uint8_t op, bool fin, std::uint64_t length, bool masked = true,
            std::uint8_t rsv = 0) {
  bytes b;
  b.push_back(static_cast<std::uint8_t>((fin ? 0x80 : 0) | rsv << 4 | op));
  const std::uint8_t m = masked ? 0x80 : 0;
  if (length < 126) {
    b.push_back(static_cast<std::uint8_t>(m | length));
  } else if (length <= 0xFFFF) {
    b.push_back(m | 126);
    b.push_back(static_cast<std::uint8_t>(length >> 8));
    b.push_back(static_cast<std::uint8_t>(length));
  } else {
    b.push_back(m | 127);
    for (int i = 7; i >= 0; --i)
      b.push_back(static_cast<std::uint8_t>(length >> (8 * i)));
  }
  if (masked) b.insert(b.end(), {1, 2, 3, 4});
  for (std::uint64_t i = 0; i < length; ++i)
    b.push_back(static_cast<std::uint8_t>('a' + i % 26) ^ (masked ? (i % 4) + 1 : 0));
  return b;
}

frame_header header_of(const bytes& b) {
  frame_header h;
  REQUIRE(parse_frame_header(b, h));
  return h;
}

/// Limits with a message limit of `rate` per second and `burst`.
message_limits limits(std::int64_t rate, std::uint32_t burst, std::uint64_t max_size = 1 << 20,
                      bool per_kib = false, bool drop = false) {
  message_limits l;
  l.max_message_size = max_size;
  if (burst != 0) l.rate = limit::make_params({rate, core::ns_per_s}, burst);
  l.per_kib = per_kib;
  l.drop = drop;
  return l;
}

constexpr core::nanos second = core::ns_per_s;

}  // namespace

TEST_CASE("frame headers: every length form, the mask, and what is too short") {
  struct row {
    std::uint64_t length;
    bool masked;
    std::uint8_t size;
  };
  for (const row r :
       {row{0, true, 6}, row{125, true, 6}, row{126, true, 8}, row{65535, true, 8},
        row{65536, true, 14}, row{5, false, 2}, row{300, false, 4}, row{70000, false, 10}}) {
    CAPTURE(r.length, r.masked);
    const bytes b = frame(binary, true, r.length, r.masked);
    const frame_header h = header_of(b);
    CHECK(h.fin);
    CHECK(h.op == binary);
    CHECK(h.masked == r.masked);
    CHECK(h.length == r.length);
    CHECK(h.size == r.size);
    CHECK_FALSE(h.bad_length);
    if (r.masked) CHECK(h.mask == std::array<std::uint8_t, 4>{1, 2, 3, 4});
    // Any prefix shorter than the header is "need more".
    for (std::size_t n = 0; n < r.size; ++n) {
      frame_header partial;
      CHECK_FALSE(parse_frame_header(std::span(b.data(), n), partial));
    }
  }
}

TEST_CASE("frame headers: lengths written longer than needed, or past 2^63, are flagged") {
  frame_header h;
  // 16-bit form for 100 bytes, 64-bit form for 65535, and a 64-bit length with its top bit.
  const bytes short16 = {0x82, 0x80 | 126, 0x00, 100, 1, 2, 3, 4};
  REQUIRE(parse_frame_header(short16, h));
  CHECK(h.bad_length);
  const bytes short64 = {0x82, 0x80 | 127, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 1, 2, 3, 4};
  REQUIRE(parse_frame_header(short64, h));
  CHECK(h.bad_length);
  const bytes top = {0x82, 0x80 | 127, 0x80, 0, 0, 0, 0, 0, 0, 1, 1, 2, 3, 4};
  REQUIRE(parse_frame_header(top, h));
  CHECK(h.bad_length);
  client_meter meter(limits(0, 0), false);
  CHECK(meter.judge(h, 0).code == protocol_error);
}

TEST_CASE("close frames the gateway sends: exact bytes, masked towards the upstream") {
  std::string out;
  append_close_frame(out, 1001, "", nullptr);
  CHECK(out == std::string("\x88\x02\x03\xE9", 4));
  out.clear();
  const std::array<std::uint8_t, 4> mask = {0x10, 0x20, 0x30, 0x40};
  append_close_frame(out, 1008, "ok", &mask);
  REQUIRE(out.size() == 2 + 4 + 4);
  const frame_header h = header_of(bytes(out.begin(), out.end()));
  CHECK(h.op == opcode::close);
  CHECK(h.masked);
  CHECK(h.length == 4);
  std::string payload;
  for (std::size_t i = 0; i < 4; ++i)
    payload += static_cast<char>(out[6 + i] ^ mask[i]);
  CHECK(payload == std::string("\x03\xF0ok", 4));
  // A reason is cut at 123 bytes: the payload of a control frame is at most 125.
  out.clear();
  append_close_frame(out, 1000, std::string(200, 'r'), nullptr);
  CHECK(header_of(bytes(out.begin(), out.end())).length == 125);
}

TEST_CASE("the splitter gives the same frames however the reads cut the stream") {
  bytes stream;
  for (const bytes& f :
       {frame(text, false, 3), frame(ping, true, 0), frame(continuation, true, 300),
        frame(binary, true, 70000), frame(opcode::close, true, 2)}) {
    stream.insert(stream.end(), f.begin(), f.end());
  }
  struct seen {
    std::vector<std::uint8_t> ops;
    std::vector<bytes> heads;
    std::vector<std::uint64_t> payload;  ///< bytes per frame
    std::size_t ends = 0;
  };
  auto walk = [&](std::size_t step) {
    frame_splitter s;
    seen out;
    for (std::size_t at = 0; at < stream.size(); at += step) {
      const std::size_t n = std::min(step, stream.size() - at);
      s.feed(
          std::span(stream.data() + at, n),
          [&](const frame_header& h, std::span<const std::uint8_t> head) {
            out.ops.push_back(h.op);
            out.heads.emplace_back(head.begin(), head.end());
            out.payload.push_back(0);
          },
          [&](std::span<const std::uint8_t> piece, bool end) {
            out.payload.back() += piece.size();
            out.ends += end ? 1 : 0;
          });
    }
    CHECK(s.payload_left() == 0);
    CHECK(s.carried() == 0);
    return out;
  };
  const seen whole = walk(stream.size());
  CHECK(whole.ops == std::vector<std::uint8_t>{text, ping, continuation, binary, opcode::close});
  CHECK(whole.payload == std::vector<std::uint64_t>{3, 0, 300, 70000, 2});
  CHECK(whole.ends == 4);  // the empty ping has no payload call
  for (std::size_t step : {1u, 2u, 3u, 7u, 13u, 14u, 4096u}) {
    CAPTURE(step);
    const seen cut = walk(step);
    CHECK(cut.ops == whole.ops);
    CHECK(cut.heads == whole.heads);
    CHECK(cut.payload == whole.payload);
    CHECK(cut.ends == whole.ends);
  }
}

TEST_CASE("the meter: malformed client frames close with 1002") {
  struct row {
    const char* what;
    bytes f;
  };
  const std::vector<row> rows = {
      {"unmasked", frame(text, true, 3, false)},
      {"reserved data opcode", frame(0x3, true, 1)},
      {"reserved control opcode", frame(0xB, true, 1)},
      {"RSV1 without an extension", frame(text, true, 1, true, 0x4)},
      {"fragmented ping", frame(ping, false, 1)},
      {"ping of 126 bytes", frame(ping, true, 126)},
      {"control frame with RSV bits", frame(pong, true, 1, true, 0x2)},
      {"continuation with no message open", frame(continuation, true, 1)},
  };
  for (const auto& r : rows) {
    CAPTURE(r.what);
    client_meter meter(limits(0, 0), false);
    const frame_verdict v = meter.judge(header_of(r.f), 0);
    CHECK(v.action == frame_action::close);
    CHECK(v.code == protocol_error);
  }
  // A new message while a fragmented one is open.
  client_meter meter(limits(0, 0), false);
  CHECK(meter.judge(header_of(frame(text, false, 1)), 0).action == frame_action::forward);
  CHECK(meter.judge(header_of(frame(binary, true, 1)), 0).code == protocol_error);
  // With an extension negotiated, RSV1 on a data frame is the extension's (permessage-deflate).
  client_meter deflate(limits(0, 0), true);
  CHECK(deflate.judge(header_of(frame(text, true, 1, true, 0x4)), 0).action ==
        frame_action::forward);
}

TEST_CASE("the meter: max_message_size exactly passes, one byte more closes 1009, fragments sum") {
  client_meter meter(limits(0, 0, 1000), false);
  CHECK(meter.judge(header_of(frame(binary, true, 1000)), 0).action == frame_action::forward);
  CHECK(meter.judge(header_of(frame(binary, true, 1001)), 0).code == message_too_big);
  client_meter fragments(limits(0, 0, 1000), false);
  CHECK(fragments.judge(header_of(frame(text, false, 600)), 0).message_start);
  const frame_verdict more = fragments.judge(header_of(frame(continuation, false, 400)), 0);
  CHECK(more.action == frame_action::forward);
  CHECK_FALSE(more.message_start);
  CHECK(fragments.judge(header_of(frame(continuation, true, 1)), 0).code == message_too_big);
  // Control frames between fragments are neither counted nor limited.
  client_meter controls(limits(1, 1, 1000), false);
  CHECK(controls.judge(header_of(frame(text, false, 10)), 0).message_start);
  for (int i = 0; i < 5; ++i) {
    const frame_verdict v = controls.judge(header_of(frame(ping, true, 4)), 0);
    CHECK(v.action == frame_action::forward);
    CHECK_FALSE(v.message_start);
  }
  CHECK(controls.judge(header_of(frame(continuation, true, 10)), 0).action ==
        frame_action::forward);
}

TEST_CASE("the meter: burst, then close 1008 at the same instant, then the rate refills") {
  client_meter meter(limits(5, 5), false);
  for (int i = 0; i < 5; ++i) {
    const frame_verdict v = meter.judge(header_of(frame(text, true, 2)), 10 * second);
    CHECK(v.action == frame_action::forward);
    CHECK(v.message_start);
    CHECK_FALSE(v.limited);
  }
  const frame_verdict over = meter.judge(header_of(frame(text, true, 2)), 10 * second);
  CHECK(over.action == frame_action::close);
  CHECK(over.code == policy_violation);
  CHECK(over.limited);
  // One emission interval (200 ms) later one more message passes, and only one.
  client_meter refill(limits(5, 5), false);
  for (int i = 0; i < 5; ++i)
    refill.judge(header_of(frame(text, true, 2)), 10 * second);
  const core::nanos later = 10 * second + second / 5;
  CHECK(refill.judge(header_of(frame(text, true, 2)), later).action == frame_action::forward);
  CHECK(refill.judge(header_of(frame(text, true, 2)), later).action == frame_action::close);
}

TEST_CASE("the meter: drop mode drops the whole excess message, never its control frames") {
  client_meter meter(limits(1, 1, 1 << 20, false, true), false);
  CHECK(meter.judge(header_of(frame(binary, true, 5)), 0).action == frame_action::forward);
  const frame_verdict first = meter.judge(header_of(frame(text, false, 5)), 0);
  CHECK(first.action == frame_action::drop);
  CHECK(first.limited);
  CHECK(meter.judge(header_of(frame(ping, true, 1)), 0).action == frame_action::forward);
  const frame_verdict rest = meter.judge(header_of(frame(continuation, true, 5)), 0);
  CHECK(rest.action == frame_action::drop);
  CHECK_FALSE(rest.limited);  // one message, counted once
  CHECK_FALSE(meter.in_message());
  // A second later the next message passes.
  CHECK(meter.judge(header_of(frame(text, true, 5)), second).action == frame_action::forward);
}

TEST_CASE("the meter: per_kib charges ceil(bytes/1024), fragments included") {
  // 4 KiB a second, burst 4 KiB: a 3 KiB + 1 byte message costs 4 and empties the bucket.
  client_meter meter(limits(4, 4, 1 << 20, true), false);
  CHECK(meter.judge(header_of(frame(binary, true, 3 * 1024 + 1)), 0).action ==
        frame_action::forward);
  CHECK(meter.judge(header_of(frame(binary, true, 0)), 0).action == frame_action::close);
  // An empty message costs 1, not 0.
  client_meter empty(limits(4, 1, 1 << 20, true), false);
  CHECK(empty.judge(header_of(frame(binary, true, 0)), 0).action == frame_action::forward);
  CHECK(empty.judge(header_of(frame(binary, true, 0)), 0).action == frame_action::close);
  // A message larger than the burst can never pass.
  client_meter huge(limits(4, 4, 1 << 20, true), false);
  CHECK(huge.judge(header_of(frame(binary, true, 5 * 1024)), 0).action == frame_action::close);
  // Fragments of an admitted message are charged without a check: the next message waits
  // for them. First frame 1 KiB (cost 1), then 3 KiB more (charged 3): the bucket is empty.
  client_meter fragments(limits(4, 4, 1 << 20, true), false);
  CHECK(fragments.judge(header_of(frame(binary, false, 1024)), 0).action == frame_action::forward);
  CHECK(fragments.judge(header_of(frame(continuation, true, 3 * 1024)), 0).action ==
        frame_action::forward);
  CHECK(fragments.judge(header_of(frame(binary, true, 1)), 0).action == frame_action::close);
  client_meter paid(limits(4, 4, 1 << 20, true), false);
  paid.judge(header_of(frame(binary, false, 1024)), 0);
  paid.judge(header_of(frame(continuation, true, 3 * 1024)), 0);
  CHECK(paid.judge(header_of(frame(binary, true, 1)), second / 4).action == frame_action::forward);
}

TEST_CASE("the meter: pings and pongs have a limit of their own, close frames none") {
  message_limits l = limits(1, 1);
  l.pings = limit::make_params({10, core::ns_per_s}, 20);
  client_meter meter(l, false);
  for (int i = 0; i < 20; ++i) {
    const frame_verdict v = meter.judge(header_of(frame(i % 2 != 0 ? pong : ping, true, 4)), 0);
    CHECK(v.action == frame_action::forward);
    CHECK_FALSE(v.message_start);
  }
  // Not a message: the message limit's burst of 1 is still whole.
  CHECK(meter.judge(header_of(frame(text, true, 2)), 0).action == frame_action::forward);
  const frame_verdict over = meter.judge(header_of(frame(ping, true, 0)), 0);
  CHECK(over.action == frame_action::close);
  CHECK(over.code == policy_violation);
  CHECK(over.reason == "pings");
  CHECK(meter.judge(header_of(frame(opcode::close, true, 2)), 0).action == frame_action::forward);
  // One emission interval (100 ms) later, one more.
  client_meter paced(l, false);
  for (int i = 0; i < 20; ++i)
    paced.judge(header_of(frame(ping, true, 0)), 0);
  CHECK(paced.judge(header_of(frame(ping, true, 0)), second / 10).action == frame_action::forward);
  CHECK(paced.judge(header_of(frame(ping, true, 0)), second / 10).action == frame_action::close);
}
