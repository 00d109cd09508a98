#include "gateway/protocol/websocket_frames.hpp"

#include <algorithm>
#include <limits>

namespace tollgate::protocol::ws {

bool parse_frame_header(std::span<const std::uint8_t> bytes, frame_header& h) noexcept {
  if (bytes.size() < 2) return false;
  const std::uint8_t b0 = bytes[0];
  const std::uint8_t b1 = bytes[1];
  h.fin = (b0 & 0x80) != 0;
  h.rsv = static_cast<std::uint8_t>((b0 >> 4) & 0x7);
  h.op = b0 & 0x0F;
  h.masked = (b1 & 0x80) != 0;
  h.bad_length = false;
  const std::uint8_t len7 = b1 & 0x7F;
  std::size_t at = 2;
  if (len7 < 126) {
    h.length = len7;
  } else if (len7 == 126) {
    if (bytes.size() < 4) return false;
    h.length = static_cast<std::uint64_t>(bytes[2]) << 8 | bytes[3];
    h.bad_length = h.length < 126;
    at = 4;
  } else {
    if (bytes.size() < 10) return false;
    h.length = 0;
    for (std::size_t i = 2; i < 10; ++i)
      h.length = h.length << 8 | bytes[i];
    h.bad_length = h.length <= 0xFFFF || (h.length >> 63) != 0;
    at = 10;
  }
  if (h.masked) {
    if (bytes.size() < at + 4) return false;
    std::copy_n(bytes.begin() + static_cast<std::ptrdiff_t>(at), 4, h.mask.begin());
    at += 4;
  }
  h.size = static_cast<std::uint8_t>(at);
  return true;
}

void append_close_frame(std::string& out, std::uint16_t code, std::string_view reason,
                        const std::array<std::uint8_t, 4>* mask) {
  reason = reason.substr(0, 123);  // a control frame's payload is at most 125 bytes
  const std::size_t length = 2 + reason.size();
  out += static_cast<char>(0x80 | close);
  out += static_cast<char>((mask != nullptr ? 0x80 : 0) | length);
  if (mask != nullptr) out.append(reinterpret_cast<const char*>(mask->data()), 4);
  const std::size_t payload = out.size();
  out += static_cast<char>(code >> 8);
  out += static_cast<char>(code & 0xFF);
  out += reason;
  if (mask == nullptr) return;
  for (std::size_t i = 0; i < length; ++i)
    out[payload + i] = static_cast<char>(out[payload + i] ^ (*mask)[i % 4]);
}

message_limits compile_limits(const config::websocket_config& c) noexcept {
  message_limits m;
  m.max_message_size = c.max_message_size;
  if (c.messages) m.rate = limit::make_params(c.messages->rate, c.messages->burst);
  m.per_kib = c.cost == config::message_cost::per_kib;
  m.drop = c.on_excess == config::excess_action::drop;
  m.pings = limit::make_params(c.pings.rate, c.pings.burst);
  return m;
}

namespace {

/// What `bytes` of a message cost under `per_kib` (at least 1: an empty message is one).
std::uint64_t cost_of(std::uint64_t bytes, bool per_kib) noexcept {
  if (!per_kib) return 1;
  return std::max<std::uint64_t>(1, bytes / 1024 + (bytes % 1024 != 0 ? 1 : 0));
}

/// A cost as GCRA takes it: more than any burst can pay is as good as infinite.
std::uint32_t bounded(std::uint64_t cost) noexcept {
  return static_cast<std::uint32_t>(std::min<std::uint64_t>(cost, 1u << 30));
}

constexpr frame_verdict closing(std::uint16_t code) noexcept {
  return {.action = frame_action::close, .code = code};
}

}  // namespace

void client_meter::charge(std::uint64_t cost, core::nanos now) noexcept {
  if (limits_.rate.burst == 0 || cost == 0) return;
  // As GCRA would after admitting it: the connection owes what its message sent.
  tat_ = std::max(tat_, now) + static_cast<core::nanos>(bounded(cost)) * limits_.rate.emission;
}

frame_verdict client_meter::judge(const frame_header& h, core::nanos now) noexcept {
  if (!h.masked || h.bad_length) return closing(protocol_error);
  if (h.control()) {
    // Control frames: close, ping, pong; never fragmented, never over 125 bytes, no RSV bits.
    if (h.op > pong || !h.fin || h.length > 125 || h.rsv != 0) return closing(protocol_error);
    if (h.op != close && limits_.pings.burst != 0) {
      const auto r = limit::gcra_check(ping_tat_, now, 1, limits_.pings);
      if (!r.allowed) {
        return {.action = frame_action::close,
                .code = policy_violation,
                .limited = true,
                .reason = "pings"};
      }
      ping_tat_ = r.tat;
    }
    return {};
  }
  if (h.op > binary) return closing(protocol_error);  // 0x3-0x7 are reserved
  if (h.rsv != 0 && !extensions_) return closing(protocol_error);
  if (h.op == continuation) {
    if (!in_message_) return closing(protocol_error);
    const std::uint64_t before = message_bytes_;
    // Summed without overflow: either term alone may be up to 2^63.
    if (h.length > limits_.max_message_size - message_bytes_) return closing(message_too_big);
    message_bytes_ += h.length;
    in_message_ = !h.fin;
    if (dropping_) {
      dropping_ = in_message_;
      return {.action = frame_action::drop};
    }
    charge(cost_of(message_bytes_, limits_.per_kib) - cost_of(before, limits_.per_kib), now);
    return {};
  }
  // text or binary: a new message.
  if (in_message_) return closing(protocol_error);
  if (h.length > limits_.max_message_size) return closing(message_too_big);
  message_bytes_ = h.length;
  in_message_ = !h.fin;
  if (limits_.rate.burst != 0) {
    const auto r =
        limit::gcra_check(tat_, now, bounded(cost_of(h.length, limits_.per_kib)), limits_.rate);
    if (!r.allowed) {
      if (!limits_.drop) {
        return {.action = frame_action::close,
                .code = policy_violation,
                .message_start = true,
                .limited = true};
      }
      dropping_ = in_message_;
      return {.action = frame_action::drop, .message_start = true, .limited = true};
    }
    tat_ = r.tat;
  }
  return {.message_start = true};
}

}  // namespace tollgate::protocol::ws
