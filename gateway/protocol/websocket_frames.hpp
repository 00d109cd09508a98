#pragma once
/// WebSocket frames as the gateway's relay sees them (RFC 6455 §5): their headers parsed, the
/// client's messages judged against the category's message limits (docs/design.md §6), and the
/// close frames the gateway sends itself. Payloads are never copied or unmasked here: the relay
/// forwards frames verbatim and only needs to know where each one starts and what it is.
/// No I/O, no Asio: the relay in net/ feeds bytes in, tests and the fuzzer feed strings.

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "gateway/config/policy.hpp"
#include "gateway/core/clock.hpp"
#include "gateway/limit/gcra.hpp"

namespace tollgate::protocol::ws {

/// Frame opcodes (RFC 6455 §5.2).
enum opcode : std::uint8_t {
  continuation = 0x0,
  text = 0x1,
  binary = 0x2,
  close = 0x8,
  ping = 0x9,
  pong = 0xA
};

/// Close codes the gateway sends (RFC 6455 §7.4.1).
inline constexpr std::uint16_t going_away = 1001;        ///< lifetime, idle, drain
inline constexpr std::uint16_t protocol_error = 1002;    ///< a malformed frame from the client
inline constexpr std::uint16_t policy_violation = 1008;  ///< over the message limit (close)
inline constexpr std::uint16_t message_too_big = 1009;   ///< over max_message_size
/// The code a connection that ended without a close frame is counted under (never sent).
inline constexpr std::uint16_t abnormal = 1006;

/// Most bytes of a frame header: 2, a 64-bit length, a mask.
inline constexpr std::size_t max_header = 14;

/// One frame's header.
struct frame_header {
  bool fin = false;                    ///< the last frame of its message
  std::uint8_t rsv = 0;                ///< RSV1..3 as bits 0x4, 0x2, 0x1 (extensions)
  std::uint8_t op = 0;                 ///< opcode
  bool masked = false;                 ///< the payload is masked (every client frame must be)
  std::uint64_t length = 0;            ///< payload bytes
  std::uint8_t size = 0;               ///< header bytes: 2 to 14
  std::array<std::uint8_t, 4> mask{};  ///< masking key, when masked
  /// Whether the length was written in more bytes than needed, or the 64-bit form has its top
  /// bit set: both forbidden by §5.2.
  bool bad_length = false;

  /// Whether this is a control frame (close, ping, pong and the reserved 0xB-0xF).
  bool control() const noexcept { return op >= 0x8; }
};

/// Parses the frame header at the start of `bytes`. False when `bytes` holds less than the
/// whole header (more is needed); then `h` is unspecified.
bool parse_frame_header(std::span<const std::uint8_t> bytes, frame_header& h) noexcept;

/// Cuts a stream of frames into headers and payload pieces, however reads split it: a header
/// split across reads is carried (at most 14 bytes) until it is whole.
/// Thread safety: none; one direction of one connection.
class frame_splitter {
 public:
  /// Walks `bytes`, the next bytes of the stream: calls `on_header(h, head)` for each whole
  /// frame header (`head`: its bytes, valid until the next feed) and `on_payload(piece, end)`
  /// for each piece of a payload (`end`: the frame's last bytes; not called for an empty
  /// payload).
  template <class OnHeader, class OnPayload>
  void feed(std::span<const std::uint8_t> bytes, OnHeader&& on_header, OnPayload&& on_payload) {
    const std::uint8_t* p = bytes.data();
    const std::size_t n = bytes.size();
    std::size_t pos = 0;
    while (pos < n) {
      if (payload_left_ > 0) {
        const auto take = static_cast<std::size_t>(std::min<std::uint64_t>(payload_left_, n - pos));
        payload_left_ -= take;
        on_payload(std::span(p + pos, take), payload_left_ == 0);
        pos += take;
        continue;
      }
      frame_header h;
      const std::uint8_t* head = nullptr;
      if (carried_ > 0) {
        const std::size_t add = std::min<std::size_t>(max_header - carried_, n - pos);
        std::copy_n(p + pos, add, carry_.data() + carried_);
        if (!parse_frame_header(std::span(carry_.data(), carried_ + add), h)) {
          carried_ = static_cast<std::uint8_t>(carried_ + add);
          return;  // every byte taken: the header goes on in the next feed
        }
        pos += h.size - carried_;
        carried_ = 0;
        head = carry_.data();
      } else if (!parse_frame_header(std::span(p + pos, n - pos), h)) {
        std::copy_n(p + pos, n - pos, carry_.data());
        carried_ = static_cast<std::uint8_t>(n - pos);
        return;
      } else {
        head = p + pos;
        pos += h.size;
      }
      payload_left_ = h.length;
      on_header(h, std::span(head, h.size));
    }
  }
  /// Payload bytes of the current frame still to come (0: between frames).
  std::uint64_t payload_left() const noexcept { return payload_left_; }
  /// Bytes of a header carried to the next feed.
  std::size_t carried() const noexcept { return carried_; }

 private:
  std::uint64_t payload_left_ = 0;                ///< see payload_left
  std::array<std::uint8_t, max_header> carry_{};  ///< a header split across feeds
  std::uint8_t carried_ = 0;                      ///< its bytes so far
};

/// A close frame with `code` and `reason` (at most 123 bytes; cut there), appended to `out`:
/// masked with `mask` when sent to the upstream (as a client), unmasked to the client.
void append_close_frame(std::string& out, std::uint16_t code, std::string_view reason,
                        const std::array<std::uint8_t, 4>* mask);

/// A category's message limits, compiled (docs/design.md §6).
struct message_limits {
  std::uint64_t max_message_size = 1 << 20;  ///< larger messages close the connection (1009)
  limit::gcra_params rate;                   ///< per connection; burst 0: no message limit
  bool per_kib = false;                      ///< cost ceil(bytes/1024), else 1 per message
  bool drop = false;                         ///< over the limit: dropped, else close 1008
  limit::gcra_params pings;                  ///< pings and pongs per connection (close 1008)
};

/// The compiled form of `c`.
message_limits compile_limits(const config::websocket_config& c) noexcept;

/// What the relay does with a frame from the client.
enum class frame_action : std::uint8_t {
  forward,  ///< relay it upstream
  drop,     ///< discard it (and it is counted): its message is over the limit, mode drop
  close     ///< relay nothing more; close the connection with `verdict::code`
};

/// The judgement of one client frame.
struct frame_verdict {
  frame_action action = frame_action::forward;
  std::uint16_t code = 0;  ///< the close code, for action close
  /// This frame starts a data message (counted once per message, however it is fragmented).
  bool message_start = false;
  /// This frame's message was found over the message limit (close or drop; counted once).
  bool limited = false;
  /// What the close names as its reason ("" for none): "pings" past the ping limit.
  std::string_view reason{};
};

/// The state of one connection's messages from the client: which message is open, its bytes
/// so far, and the GCRA state of the connection's message limit.
/// Thread safety: none; one connection's.
class client_meter {
 public:
  /// A meter under `limits`; `extensions` when the handshake negotiated an extension (then
  /// data frames may set RSV bits, as permessage-deflate's RSV1).
  client_meter(const message_limits& limits, bool extensions) noexcept
      : limits_(limits), extensions_(extensions) {}

  /// Judges the frame with header `h`, arriving at `now`. A fragmented message is judged on
  /// its first frame (cost: one message, or the KiB that frame carries); later fragments of an
  /// admitted message are charged their further KiB without a check (the next message pays),
  /// those of a dropped message are dropped. Pings and pongs count against the ping limit
  /// (past it: close 1008, reason "pings"); a close frame is never limited. Malformed
  /// frames (unmasked, reserved opcodes or bits, control frames fragmented or over 125 bytes,
  /// a continuation with no message open or a new message inside one) close with 1002.
  frame_verdict judge(const frame_header& h, core::nanos now) noexcept;

  /// Whether a fragmented message is open (more frames of it to come).
  bool in_message() const noexcept { return in_message_; }

 private:
  /// Charges `cost` without a check (fragments of an admitted message).
  void charge(std::uint64_t cost, core::nanos now) noexcept;

  message_limits limits_;            ///< the category's, when the connection opened
  bool extensions_;                  ///< RSV bits allowed on data frames
  bool in_message_ = false;          ///< a data message has begun and not ended
  bool dropping_ = false;            ///< the open message is being dropped
  std::uint64_t message_bytes_ = 0;  ///< payload bytes of the open message so far
  core::nanos tat_ = 0;              ///< GCRA state of the message limit
  core::nanos ping_tat_ = 0;         ///< GCRA state of the ping limit
};

}  // namespace tollgate::protocol::ws
