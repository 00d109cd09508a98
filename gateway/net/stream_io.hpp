#pragma once
/// Reads and writes on the gateway's streams: one read into a parser's buffer, a head read
/// whole, writes tried at once and awaited only for what the kernel did not take. Internal to
/// net/.

#include <span>
#include <string_view>
#include <tuple>
#include <type_traits>

#include "gateway/net/asio.hpp"
#include "gateway/net/client_stream.hpp"
#include "gateway/net/messages.hpp"
#include "gateway/net/upstream_stream.hpp"

namespace tollgate::net {

/// The bytes of `b` as text.
inline std::string_view view_of(const beast::flat_buffer& b) {
  return {static_cast<const char*>(b.cdata().data()), b.size()};
}

/// One read from `s` into `buffer`, as large as the buffer's free room (at least 4 KiB). At the
/// end of the stream `parser` is told so: that completes a body delimited by the close, and is
/// `end_of_stream` before a message or `partial_message` inside one. The bytes read are left
/// for parse_buffered. Beast's composed reads do the same through three layers of operations.
template <class Stream, bool isRequest, class Body, class Allocator>
task<error_code> read_more(Stream& s, beast::flat_buffer& buffer,
                           http::parser<isRequest, Body, Allocator>& parser) {
  const std::size_t room = buffer.capacity() - buffer.size();
  const auto space = buffer.prepare(room >= 4096 ? room : 4096);
  error_code ec;
  std::size_t n = 0;
  if constexpr (std::is_same_v<Stream, client_stream> || std::is_same_v<Stream, upstream_stream>) {
    if (s.tls()) {
      std::tie(ec, n) = co_await s.tls_read_some(space);
    } else if constexpr (std::is_same_v<Stream, upstream_stream>) {
      // A pooled connection's read ahead is this read (upstream_stream::read_ahead).
      if (s.reading_ahead()) {
        std::tie(ec, n) = co_await s.async_take_ahead(space, use_tuple);
      } else {
        std::tie(ec, n) = co_await s.socket().async_read_some(space, use_tuple);
      }
    } else {
      std::tie(ec, n) = co_await s.socket().async_read_some(space, use_tuple);
    }
  } else {
    std::tie(ec, n) = co_await s.async_read_some(space, use_tuple);
  }
  if (ec == asio::error::eof) {
    // Before any byte of a message the stream simply ended (an idle keep-alive connection
    // the peer closed): Beast's put_eof must not see that case.
    if (!parser.got_some()) co_return http::error::end_of_stream;
    error_code eof;
    parser.put_eof(eof);
    co_return eof;
  }
  if (!ec) buffer.commit(n);
  co_return ec;
}

/// Reads until `parser` has the whole head (bounded by its header limit).
template <class Stream, bool isRequest, class Body, class Allocator>
task<error_code> read_head(Stream& s, beast::flat_buffer& buffer,
                           http::parser<isRequest, Body, Allocator>& parser) {
  for (;;) {
    error_code ec;
    parse_buffered(parser, buffer, ec);
    if (ec || parser.is_header_done()) co_return ec;
    if (error_code rec = co_await read_more(s, buffer, parser)) co_return rec;
  }
}

/// Writes as much of `rest` as the socket takes without waiting (sockets of the data path are
/// non-blocking) and drops what was written from `rest`; an empty `rest` means all went out.
/// Returns an error other than "would block". A write that completes at once this way costs
/// one system call; awaited, it would also cost a trip through the scheduler.
error_code write_now(tcp_socket& s, std::span<asio::const_buffer>& rest);

/// Writes all of `pieces`: at once when the socket takes it, awaited otherwise.
inline task<error_code> write_all(tcp_socket& s, std::span<asio::const_buffer> pieces) {
  if (error_code ec = write_now(s, pieces); ec || pieces.empty()) co_return ec;
  auto [ec, n] = co_await asio::async_write(s, pieces, use_tuple);
  co_return ec;
}

/// Writes all of `pieces` to the upstream: plain as above, or encrypted.
inline task<error_code> write_all(upstream_stream& s, std::span<asio::const_buffer> pieces) {
  if (s.tls()) co_return co_await s.tls_write(pieces);
  if (error_code ec = write_now(s.socket(), pieces); ec || pieces.empty()) co_return ec;
  auto [ec, n] = co_await asio::async_write(s.socket(), pieces, use_tuple);
  co_return ec;
}

/// Writes all of `pieces` to the client: plain as above, or encrypted.
inline task<error_code> write_all(client_stream& s, std::span<asio::const_buffer> pieces) {
  for (const auto& p : pieces)
    s.written += p.size();
  if (s.tls()) co_return co_await s.tls_write(pieces);
  if (error_code ec = write_now(s.socket(), pieces); ec || pieces.empty()) co_return ec;
  auto [ec, n] = co_await asio::async_write(s.socket(), pieces, use_tuple);
  co_return ec;
}

}  // namespace tollgate::net
