/// Fuzz target: the HTTP head path of gateway/net: Beast's parsers as the session and the
/// forwarder configure them (fields in a field_arena, their header and body limits), fed as
/// reads deliver bytes, and the heads rendered by render_upstream_head / render_client_head.
///
/// Input: a flags byte (1: a response, else a request; 2: the response answers HEAD; 4: the
/// client speaks HTTP/1.0; 8: the client connection stays open; 16: the response carries
/// rate-limit fields; 32: a rejection's fields too), a count byte (its value mod 8 segment
/// sizes follow, each byte + 1; used in turn, the last again; none: one read), then the bytes
/// of the message as an upstream or a client sends them.
///
/// Checked, for each head that parses (and is one the gateway renders: final responses only):
/// the rendered head parses with a fresh parser to its last byte and no further (no second
/// head inside it); it keeps the method and target, or the status; its framing is the one
/// the renderer announced; and every field in it is one the message had or the gateway adds
/// (a value cannot smuggle a field in).

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "gateway/core/text.hpp"
#include "gateway/net/heads.hpp"
#include "gateway/net/messages.hpp"
#include "gateway/net/scratch.hpp"
#include "gateway/net/stream_io.hpp"

namespace {

using namespace tollgate;
using namespace tollgate::net;

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_http_heads: %s\n", what);
  std::abort();
}

/// The limits of session.cpp (max_header_bytes, max_request_body defaults) and forward.cpp.
constexpr std::uint32_t request_head_limit = 16 * 1024;
constexpr std::uint64_t request_body_limit = 16 * 1024 * 1024;
constexpr std::uint32_t response_head_limit = 64 * 1024;

/// Fields the gateway writes itself into a head it renders.
constexpr std::string_view added_fields[] = {"Host",
                                             "X-Forwarded-For",
                                             "X-Forwarded-Proto",
                                             "X-Real-IP",
                                             "Content-Length",
                                             "Transfer-Encoding",
                                             "Connection",
                                             "X-RateLimit-Limit",
                                             "X-RateLimit-Remaining",
                                             "X-RateLimit-Reset",
                                             "X-RateLimit-Level",
                                             "RateLimit-Policy",
                                             "RateLimit",
                                             "Retry-After",
                                             "X-RateLimit-Reason"};

/// Feeds `message` to `parser` through a flat_buffer in reads of `sizes` bytes (the last size
/// repeats), as read_request_head / read_head do, until the head is there or fails. False
/// when there is no head: an error, the head limit, or the bytes ran out first.
template <bool isRequest>
bool read_head(http::parser<isRequest, http::buffer_body, arena_allocator<char>>& parser,
               std::string_view message, std::span<const std::uint8_t> sizes, std::size_t limit) {
  beast::flat_buffer buffer;
  std::size_t head = 0, at = 0, turn = 0;
  while (at < message.size()) {
    std::size_t n = sizes.empty() ? message.size() : sizes[std::min(turn++, sizes.size() - 1)] + 1u;
    n = std::min(n, message.size() - at);
    const auto space = buffer.prepare(n);
    std::copy_n(message.data() + at, n, static_cast<char*>(space.data()));
    buffer.commit(n);
    at += n;
    error_code ec;
    const std::size_t before = buffer.size();
    parse_buffered(parser, buffer, ec);
    head += before - buffer.size();
    if (ec) return false;
    // The session counts the whole head, request line included, against its limit.
    if (parser.is_header_done()) return head <= limit;
    if (head + buffer.size() > limit) return false;
  }
  return false;
}

/// Parses `rendered` with a fresh parser; it must be exactly one whole head.
template <class Parser>
void reparse(Parser& parser, const std::string& rendered) {
  error_code ec;
  const std::size_t used = parser.put(asio::buffer(rendered), ec);
  require(!ec || ec == http::error::need_buffer, "a rendered head does not parse");
  require(parser.is_header_done(), "a rendered head is incomplete");
  require(used == rendered.size(), "a rendered head ends before its last byte");
}

/// Every field of `out` is in `in` or is one the gateway adds.
template <class Fields>
void check_field_names(const Fields& in, const Fields& out) {
  for (const auto& f : out) {
    const std::string_view name = sv(f.name_string());
    const bool added = std::any_of(std::begin(added_fields), std::end(added_fields),
                                   [&](std::string_view a) { return core::iequals(a, name); });
    require(added || in.find(f.name_string()) != in.end(),
            "a rendered head has a field the message did not have");
  }
}

/// How reading a request head ended.
enum class head_outcome { ran_out, head, refused };

/// Reads a request head from `message` in reads of `sizes` bytes (none: one read) the way the
/// session does (parse_head_buffered, its exact limit); `head` gets the head's length.
head_outcome read_request(request_parser& parser, std::string_view message,
                          std::span<const std::uint8_t> sizes, std::uint64_t& head) {
  beast::flat_buffer buffer;
  std::size_t at = 0, turn = 0;
  head = 0;
  while (at < message.size()) {
    std::size_t n = sizes.empty() ? message.size() : sizes[std::min(turn++, sizes.size() - 1)] + 1u;
    n = std::min(n, message.size() - at);
    const auto space = buffer.prepare(n);
    std::copy_n(message.data() + at, n, static_cast<char*>(space.data()));
    buffer.commit(n);
    at += n;
    error_code ec;
    if (parse_head_buffered(parser, buffer, head, request_head_limit, ec))
      return head_outcome::head;
    if (ec) return head_outcome::refused;
  }
  return head_outcome::ran_out;
}

void check_request(std::string_view message, std::span<const std::uint8_t> sizes) {
  field_arena arena, arena2, arena3;
  auto parser = std::make_from_tuple<request_parser>(on_arena(arena));
  parser.header_limit(request_head_limit);
  parser.body_limit(request_body_limit);
  std::uint64_t head = 0;
  const head_outcome outcome = read_request(parser, message, sizes, head);
  // However the bytes arrive, the same bytes make the same head, or none. (Without a head,
  // Beast may refuse early or wait for more depending on where reads end: it looks for the
  // head's end before it parses fields it already has. Either way nothing is served.)
  auto whole = std::make_from_tuple<request_parser>(on_arena(arena3));
  whole.header_limit(request_head_limit);
  whole.body_limit(request_body_limit);
  std::uint64_t whole_head = 0;
  const head_outcome whole_outcome = read_request(whole, message, {}, whole_head);
  require((outcome == head_outcome::head) == (whole_outcome == head_outcome::head),
          "whether a head is taken depends on how its bytes arrive");
  if (outcome != head_outcome::head) return;
  require(head == whole_head && head <= request_head_limit, "a head past the limit was taken");
  bool has_host = false;
  if (!head_fault(parser, has_host).empty()) return;  // refused with 400 before anything else
  const auto& req = parser.get();
  std::string out;
  // forward.cpp gives an HTTP/1.0 request without Host its upstream's first endpoint.
  render_upstream_head(
      out, parser,
      {"203.0.113.9, 198.51.100.7", "http", "203.0.113.9", has_host ? "" : "127.0.0.1:9000", ""});
  auto again = std::make_from_tuple<request_parser>(on_arena(arena2));
  again.header_limit(1 << 20);
  again.body_limit(boost::none);
  reparse(again, out);
  const auto& back = again.get();
  require(back.method_string() == req.method_string(), "the rendered request changes method");
  require(back.target() == req.target(), "the rendered request changes target");
  require(again.chunked() == parser.chunked(), "the rendered request changes chunked framing");
  require(again.content_length() == parser.content_length(),
          "the rendered request changes Content-Length");
  bool back_has_host = false;
  require(head_fault(again, back_has_host).empty() && back_has_host,
          "the upstream would refuse the rendered request");
  check_field_names(req.base(), back.base());
}

void check_response(std::string_view message, std::span<const std::uint8_t> sizes, unsigned flags) {
  const bool head_request = (flags & 2) != 0;
  field_arena arena, arena2;
  std::optional<response_parser> rp;
  std::apply([&](auto&&... a) { rp.emplace(a...); }, on_arena(arena));
  rp->body_limit(boost::none);
  rp->header_limit(response_head_limit);
  if (head_request) rp->skip(true);
  if (!read_head(*rp, message, sizes, response_head_limit)) return;
  const unsigned status = rp->get().result_int();
  // forward.cpp reads past 1xx other than an upgrade's 101, which render_switching_head
  // renders; otherwise only final responses are rendered.
  if (status < 200 && status != 101) return;

  policy::rate_limit_fields fields;
  fields.present = (flags & 16) != 0;
  fields.limit = "5";
  fields.remaining = "0";
  fields.reset = "2";
  fields.level = "ipv4_individual";
  fields.policy = "5;w=1";
  fields.ratelimit = "limit=5, remaining=0, reset=2";
  if ((flags & 32) != 0) {
    fields.retry_after = "2";
    fields.reason = "ipv4_individual";
  }
  if (status == 101) {
    std::string out;
    render_switching_head(out, *rp, fields, {});
    std::optional<response_parser> again;
    std::apply([&](auto&&... a) { again.emplace(a...); }, on_arena(arena2));
    again->header_limit(1 << 20);
    reparse(*again, out);
    const auto& back = again->get();
    require(back.result_int() == 101 && again->is_done(), "the rendered 101 is not a 101");
    require(beast::iequals(back[http::field::upgrade], "websocket") &&
                beast::iequals(back[http::field::connection], "Upgrade") &&
                back.count(http::field::upgrade) == 1 && back.count(http::field::connection) == 1,
            "the rendered 101 does not switch to websocket, once");
    require(back.count(http::field::content_length) == 0 &&
                back.count(http::field::transfer_encoding) == 0,
            "the rendered 101 has framing");
    return;
  }
  const unsigned version = (flags & 4) != 0 ? 10 : 11;
  std::string out;
  const client_framing framing =
      render_client_head(out, *rp, {version, (flags & 8) != 0, head_request, &fields, {}, false});

  std::optional<response_parser> again;
  std::apply([&](auto&&... a) { again.emplace(a...); }, on_arena(arena2));
  again->header_limit(1 << 20);
  again->body_limit(boost::none);
  if (head_request) again->skip(true);
  reparse(*again, out);
  const auto& back = again->get();
  require(back.result_int() == status, "the rendered response changes status");
  require(back.version() == version, "the rendered response has another version");
  require(again->chunked() == framing.chunked,
          "the rendered response's framing is not the one announced");
  require(back.keep_alive() == framing.keep_alive,
          "the rendered response's persistence is not the one announced");
  if (!framing.chunked && again->content_length()) {
    require(again->content_length() == rp->content_length(),
            "the rendered response changes Content-Length");
  }
  check_field_names(rp->get().base(), back.base());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return -1;
  const unsigned flags = data[0];
  const std::size_t count = std::min<std::size_t>(data[1] % 8, size - 2);
  const std::span<const std::uint8_t> sizes(data + 2, count);
  const std::string_view message(reinterpret_cast<const char*>(data) + 2 + count, size - 2 - count);
  if ((flags & 1) != 0) {
    check_response(message, sizes, flags);
  } else {
    check_request(message, sizes);
  }
  return 0;
}
