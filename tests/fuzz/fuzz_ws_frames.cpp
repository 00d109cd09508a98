/// Fuzz target: WebSocket frames from untrusted peers (gateway/policy/websocket.*), as the
/// relay walks them: the frame splitter fed the same bytes whole and cut into reads of sizes
/// the input chooses, every header judged by a client meter.
///
/// Input: one byte of meter options (limits, drop, per_kib, extensions), one byte seeding the
/// read sizes, then the stream. Checked: however the stream is cut, the same headers (same
/// bytes) and the same payload bytes per frame come out, and every byte is accounted for (in
/// a header, a payload, or carried as the start of the next header, at most 13 bytes); the
/// meter never forwards a data frame that makes its message exceed max_message_size, never
/// forwards an unmasked frame or a continuation outside a message, and says 1002, 1008 or
/// 1009 when it closes; a close frame the gateway renders parses back to what it said.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gateway/protocol/websocket_frames.hpp"

namespace ws = tollgate::protocol::ws;

namespace {

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_ws_frames: %s\n", what);
  std::abort();
}

struct walked {
  std::vector<std::vector<std::uint8_t>> heads;
  std::vector<std::vector<std::uint8_t>> payloads;
  std::size_t ends = 0;
  std::uint64_t bytes = 0;
};

/// Walks `stream` in reads whose sizes come from `seed` (0: one read).
walked walk(const std::vector<std::uint8_t>& stream, std::uint8_t seed, ws::client_meter& meter,
            std::uint64_t max_size) {
  ws::frame_splitter s;
  walked out;
  std::uint32_t state = seed;
  bool closed = false;
  std::uint64_t message = 0;
  for (std::size_t at = 0; at < stream.size();) {
    std::size_t n = stream.size() - at;
    if (seed != 0) {
      state = state * 1103515245u + 12345u;
      n = std::min<std::size_t>(n, 1 + (state >> 16) % 40);
    }
    s.feed(
        std::span(stream.data() + at, n),
        [&](const ws::frame_header& h, std::span<const std::uint8_t> head) {
          require(head.size() == h.size && h.size >= 2 && h.size <= ws::max_header,
                  "a header of an impossible size");
          out.heads.emplace_back(head.begin(), head.end());
          out.payloads.emplace_back();
          out.bytes += head.size();
          if (closed) return;
          const ws::frame_verdict v = meter.judge(h, 1'000'000'000);
          if (v.action == ws::frame_action::close) {
            require(v.code == ws::protocol_error || v.code == ws::policy_violation ||
                        v.code == ws::message_too_big,
                    "a close with an unexpected code");
            closed = true;
            return;
          }
          require(h.masked, "an unmasked frame passed");
          if (!h.control()) {
            require(h.op != ws::continuation || message > 0 || !v.message_start,
                    "a continuation started a message");
            message = v.message_start ? h.length : message + h.length;
            require(message <= max_size, "a message over max_message_size passed");
          }
        },
        [&](std::span<const std::uint8_t> piece, bool end) {
          out.payloads.back().insert(out.payloads.back().end(), piece.begin(), piece.end());
          out.bytes += piece.size();
          out.ends += end ? 1 : 0;
        });
    at += n;
  }
  require(out.bytes + s.carried() == stream.size(), "bytes lost or invented");
  require(s.carried() < ws::max_header, "a whole header carried");
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const std::uint8_t options = data[0];
  const std::uint8_t seed = data[1];
  const std::vector<std::uint8_t> stream(data + 2, data + size);

  ws::message_limits limits;
  limits.max_message_size = 1 + (options & 0x3) * 700;  // 1, 701, 1401, 2101 bytes
  if (options & 0x4) limits.rate = tollgate::limit::make_params({3, 1'000'000'000}, 3);
  limits.drop = (options & 0x8) != 0;
  limits.per_kib = (options & 0x10) != 0;
  const bool extensions = (options & 0x20) != 0;

  ws::client_meter whole_meter(limits, extensions), cut_meter(limits, extensions);
  const walked whole = walk(stream, 0, whole_meter, limits.max_message_size);
  const walked cut = walk(stream, seed == 0 ? 1 : seed, cut_meter, limits.max_message_size);
  require(whole.heads == cut.heads, "headers differ with the cuts");
  require(whole.payloads == cut.payloads, "payloads differ with the cuts");
  require(whole.ends == cut.ends, "frame ends differ with the cuts");

  // The gateway's own close frames parse back to what they say.
  const std::array<std::uint8_t, 4> mask = {data[0], data[1], 7, 9};
  std::string frame;
  const std::uint16_t code = static_cast<std::uint16_t>(1000 + options);
  ws::append_close_frame(frame, code,
                         std::string_view(reinterpret_cast<const char*>(stream.data()),
                                          std::min<std::size_t>(stream.size(), 200)),
                         (options & 0x40) ? &mask : nullptr);
  ws::frame_header h;
  require(ws::parse_frame_header(
              std::span(reinterpret_cast<const std::uint8_t*>(frame.data()), frame.size()), h),
          "a close frame does not parse");
  require(h.fin && h.op == ws::close && h.length <= 125 && h.size + h.length == frame.size() &&
              !h.bad_length && h.masked == ((options & 0x40) != 0),
          "a close frame parses to something else");
  std::uint16_t got = static_cast<std::uint8_t>(frame[h.size] ^ (h.masked ? h.mask[0] : 0));
  got = static_cast<std::uint16_t>(
      got << 8 | static_cast<std::uint8_t>(frame[h.size + 1] ^ (h.masked ? h.mask[1] : 0)));
  require(got == code, "a close frame carries another code");
  return 0;
}
