// tollgate-echo: the demo upstream. Answers every request with JSON describing what it
// received, so a newcomer (and the integration tests) can see what the gateway forwards.
//
//   tollgate-echo [--address A] [--port N] [--threads N]
//
// Query parameters shape the answer: status=NNN, size=N (an N-byte body instead of JSON),
// chunked=1 (that body chunked), delay_ms=N (answer late), violation=REASON (report it to
// the gateway in X-Tollgate-Violation, as an application flags abuse), tier=NAME (set the
// client's consumer tier in X-Tollgate-Tier, as an application that knows its plan),
// trailer=NAME:VALUE (a chunked body "hello" with that trailer field, declared in Trailer). GET
// /_echo/stats returns
// {"requests":N,"ws_connections":C,"ws_open":O,"ws_messages":M}: the other requests received
// (accepted upgrades included), the WebSocket upgrades accepted, those open now, and the data
// messages received on them.
//
// A WebSocket upgrade (with a Sec-WebSocket-Key; without one it is plain HTTP, as before) is
// accepted and each message echoed whole, with its type. On the upgrade target, status=NNN
// refuses it with that plain HTTP answer ("upgrade refused\n", Connection: close), so a test
// sees a non-101 relayed; protocol=X picks X among the offered Sec-WebSocket-Protocol values
// (default: the first offered; none offered, none answered); deflate=0 turns permessage-deflate
// off (on by default; the client decides whether to offer it). Text messages that are commands
// instead of echoed: "close:CODE:REASON" closes with that code and reason (an upstream-initiated
// close), "send:N:SIZE" sends N binary messages of SIZE bytes ('a' + i % 26) for push tests.
// Messages up to 64 MiB; a quiet connection is never timed out.

#include <sys/socket.h>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

#include <atomic>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

// GCC 12 misreads Asio's recycling allocator for coroutine frames as a new/delete mismatch
// (tollgate_net turns the warning off in CMakeLists.txt for the same reason).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;
constexpr auto use_tuple = asio::as_tuple(asio::deferred);

namespace {

// Counters for /_echo/stats; atomics because each --threads io_context serves on its own thread.
std::atomic<std::uint64_t> served{0};
std::atomic<std::uint64_t> ws_connections{0};
std::atomic<std::uint64_t> ws_open{0};
std::atomic<std::uint64_t> ws_messages{0};

std::string json_escape(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

/// FNV-1a 64 of a body: enough for tests to check that bytes arrived intact.
std::uint64_t fnv1a64(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s)
    h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

/// The value of query parameter `name` in `target`, or "".
std::string_view query(std::string_view target, std::string_view name) {
  const auto q = target.find('?');
  if (q == std::string_view::npos) return {};
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    const auto amp = rest.find('&');
    const std::string_view item = rest.substr(0, amp);
    const auto eq = item.find('=');
    if (item.substr(0, eq) == name) return eq == std::string_view::npos ? "" : item.substr(eq + 1);
    if (amp == std::string_view::npos) break;
    rest.remove_prefix(amp + 1);
  }
  return {};
}

std::uint64_t number(std::string_view s, std::uint64_t fallback) {
  std::uint64_t v = fallback;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

std::string describe(const http::request<http::string_body>& req) {
  std::string out = "{\"method\":\"" + json_escape(std::string_view(req.method_string())) +
                    "\",\"target\":\"" + json_escape(std::string_view(req.target())) +
                    "\",\"version\":" + std::to_string(req.version()) + ",\"headers\":[";
  bool first = true;
  for (const auto& f : req) {
    if (!first) out += ',';
    first = false;
    out += "[\"" + json_escape(std::string_view(f.name_string())) + "\",\"" +
           json_escape(std::string_view(f.value())) + "\"]";
  }
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(fnv1a64(req.body())));
  out += "],\"body_bytes\":" + std::to_string(req.body().size()) + ",\"body_fnv1a64\":\"" + hash +
         "\"}\n";
  return out;
}

/// The subprotocol to answer with: `wanted` if the client offered it, else the first offered
/// (over every Sec-WebSocket-Protocol line, each a comma-separated list); "" if none.
std::string choose_protocol(const http::request<http::string_body>& req, std::string_view wanted) {
  std::string first;
  for (auto [it, end] = req.equal_range(http::field::sec_websocket_protocol); it != end; ++it) {
    std::string_view rest(it->value().data(), it->value().size());
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      std::string_view item = rest.substr(0, comma);
      while (!item.empty() && (item.front() == ' ' || item.front() == '\t'))
        item.remove_prefix(1);
      while (!item.empty() && (item.back() == ' ' || item.back() == '\t'))
        item.remove_suffix(1);
      if (!item.empty() && item == wanted) return std::string(item);
      if (first.empty()) first = item;
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  return first;
}

/// One WebSocket connection, from the already-read upgrade request to the close. Its own
/// coroutine, so the HTTP loop's frame (parser, response) is gone while it sits idle; the
/// benchmark holds 10 000 of these.
asio::awaitable<void> websocket_session(beast::tcp_stream stream,
                                        http::request<http::string_body> req,
                                        beast::flat_buffer buffer) {
  stream.expires_never();  // the websocket timeouts below take over
  websocket::stream<beast::tcp_stream> ws(std::move(stream));
  // Handshake and close bounded, idle never: a test's quiet connection must stay open.
  ws.set_option(websocket::stream_base::timeout::suggested(beast::role_type::server));
  ws.read_message_max(64u << 20);  // the gateway in front enforces its own limit
  const std::string_view target(req.target().data(), req.target().size());
  websocket::permessage_deflate pmd;
  pmd.server_enable = query(target, "deflate") != "0";
  ws.set_option(pmd);
  ws.set_option(websocket::stream_base::decorator(
      [protocol = choose_protocol(req, query(target, "protocol"))](websocket::response_type& res) {
        res.set(http::field::server, "tollgate-echo");
        if (!protocol.empty()) res.set(http::field::sec_websocket_protocol, protocol);
      }));
  auto [aec] = co_await ws.async_accept(req, use_tuple);
  if (aec) co_return;  // Beast has answered the bad handshake
  req = {};            // its fields would otherwise stay allocated as long as the connection
  // A client sends no frame before the 101, so the HTTP read left nothing here.
  buffer.clear();
  buffer.shrink_to_fit();
  ws_connections.fetch_add(1);
  ws_open.fetch_add(1);
  struct open_guard {
    ~open_guard() { ws_open.fetch_sub(1); }
  } guard;
  for (;;) {
    // A client's close ends here as websocket::error::closed, Beast having answered it.
    auto [ec, n] = co_await ws.async_read(buffer, use_tuple);
    if (ec) co_return;
    ws_messages.fetch_add(1);
    const auto data = buffer.data();
    const std::string_view text =
        ws.got_text() ? std::string_view(static_cast<const char*>(data.data()), data.size())
                      : std::string_view();
    if (text.starts_with("close:")) {
      const std::string_view args = text.substr(6);
      const auto colon = args.find(':');
      const std::string_view reason =
          colon == std::string_view::npos ? std::string_view() : args.substr(colon + 1);
      // A close reason holds at most 123 bytes (RFC 6455 5.5: 125 with the code).
      websocket::close_reason cr;
      cr.code = static_cast<std::uint16_t>(number(args.substr(0, colon), 1000));
      cr.reason.assign(reason.data(), std::min<std::size_t>(reason.size(), 123));
      co_await ws.async_close(cr, use_tuple);
      co_return;
    }
    if (text.starts_with("send:")) {
      const std::string_view args = text.substr(5);
      const auto colon = args.find(':');
      const auto count = number(args.substr(0, colon), 0);
      std::string payload(colon == std::string_view::npos ? 0 : number(args.substr(colon + 1), 0),
                          '\0');
      for (std::size_t i = 0; i < payload.size(); ++i)
        payload[i] = static_cast<char>('a' + i % 26);
      ws.binary(true);
      for (std::uint64_t i = 0; i < count; ++i) {
        auto [wec, wn] = co_await ws.async_write(asio::buffer(payload), use_tuple);
        if (wec) co_return;
      }
    } else {
      ws.text(ws.got_text());
      auto [wec, wn] = co_await ws.async_write(data, use_tuple);
      if (wec) co_return;
    }
    buffer.consume(buffer.size());
    // A big message's buffer is not kept for an idle connection.
    if (buffer.capacity() > (64u << 10)) buffer.shrink_to_fit();
  }
}

asio::awaitable<void> serve(tcp::socket socket) {
  beast::tcp_stream stream(std::move(socket));
  beast::flat_buffer buffer;
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(64u << 20);
    stream.expires_after(std::chrono::seconds(120));
    auto [ec, n] = co_await http::async_read(stream, buffer, parser, use_tuple);
    if (ec) co_return;  // closed, timed out or garbage: nothing to answer
    auto& req = parser.get();
    const std::string_view target(req.target().data(), req.target().size());
    http::response<http::string_body> res{http::status::ok, req.version()};
    res.set(http::field::server, "tollgate-echo");
    res.keep_alive(req.keep_alive());
    if (target == "/_echo/stats") {
      res.set(http::field::content_type, "application/json");
      res.body() = "{\"requests\":" + std::to_string(served.load()) +
                   ",\"ws_connections\":" + std::to_string(ws_connections.load()) +
                   ",\"ws_open\":" + std::to_string(ws_open.load()) +
                   ",\"ws_messages\":" + std::to_string(ws_messages.load()) + "}\n";
    } else if (websocket::is_upgrade(req) && req.count(http::field::sec_websocket_key) != 0) {
      served.fetch_add(1);
      if (const auto status = query(target, "status"); !status.empty()) {
        res.result(static_cast<unsigned>(number(status, 200)));
        res.set(http::field::content_type, "text/plain");
        res.keep_alive(false);
        res.body() = "upgrade refused\n";
        res.prepare_payload();
        co_await http::async_write(stream, res, use_tuple);
        co_return;
      }
      asio::co_spawn(stream.get_executor(),
                     websocket_session(std::move(stream), parser.release(), std::move(buffer)),
                     [](std::exception_ptr) {});
      co_return;
    } else {
      served.fetch_add(1);
      if (const auto delay = number(query(target, "delay_ms"), 0); delay > 0) {
        asio::steady_timer t(stream.get_executor(), std::chrono::milliseconds(delay));
        co_await t.async_wait(use_tuple);
      }
      res.result(static_cast<unsigned>(number(query(target, "status"), 200)));
      if (const auto reason = query(target, "violation"); !reason.empty()) {
        res.set("X-Tollgate-Violation", reason);
      }
      if (const auto tier = query(target, "tier"); !tier.empty()) res.set("X-Tollgate-Tier", tier);
      if (const auto size = query(target, "size"); !size.empty()) {
        res.set(http::field::content_type, "application/octet-stream");
        std::string body(number(size, 0), '\0');
        for (std::size_t i = 0; i < body.size(); ++i)
          body[i] = static_cast<char>('a' + i % 26);
        res.body() = std::move(body);
      } else {
        res.set(http::field::content_type, "application/json");
        res.body() = describe(req);
      }
    }
    if (const auto trailer = query(target, "trailer"); !trailer.empty()) {
      // Written by hand: Beast's serializer sends no trailers.
      const auto colon = trailer.find(':');
      const std::string name(trailer.substr(0, colon));
      const std::string value(colon == std::string_view::npos ? "" : trailer.substr(colon + 1));
      const std::string raw =
          "HTTP/1.1 200 OK\r\nServer: tollgate-echo\r\n"
          "Content-Type: text/plain\r\nTransfer-Encoding: chunked\r\n"
          "Trailer: " +
          name + "\r\n\r\n5\r\nhello\r\n0\r\n" + name + ": " + value + "\r\n\r\n";
      auto [wec, wn] = co_await asio::async_write(stream, asio::buffer(raw), use_tuple);
      if (wec) co_return;
      continue;
    }
    if (query(target, "chunked") == "1") {
      res.chunked(true);
    } else {
      res.prepare_payload();
    }
    auto [wec, wn] = co_await http::async_write(stream, res, use_tuple);
    if (wec || !res.keep_alive()) co_return;
  }
}

asio::awaitable<void> accept_loop(tcp::acceptor& acceptor) {
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(use_tuple);
    if (ec) co_return;
    // Small answers go out at once: without this, an echoed WebSocket message waits for the
    // peer's delayed ACK (Nagle), and latency figures measure the echo, not the gateway.
    boost::system::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    asio::co_spawn(acceptor.get_executor(), serve(std::move(socket)), [](std::exception_ptr) {});
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string address = "127.0.0.1";
  unsigned short port = 9000;
  unsigned threads = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--address") == 0)
      address = argv[i + 1];
    else if (std::strcmp(argv[i], "--port") == 0)
      port = static_cast<unsigned short>(std::atoi(argv[i + 1]));
    else if (std::strcmp(argv[i], "--threads") == 0)
      threads = static_cast<unsigned>(std::max(1, std::atoi(argv[i + 1])));
    else {
      std::fprintf(stderr, "usage: tollgate-echo [--address A] [--port N] [--threads N]\n");
      return 2;
    }
  }
  std::vector<std::unique_ptr<asio::io_context>> ios;
  std::vector<std::unique_ptr<tcp::acceptor>> acceptors;
  tcp::endpoint ep(asio::ip::make_address(address), port);
  for (unsigned t = 0; t < threads; ++t) {
    ios.push_back(std::make_unique<asio::io_context>(1));
    auto a = std::make_unique<tcp::acceptor>(*ios.back());
    a->open(ep.protocol());
    a->set_option(asio::socket_base::reuse_address(true));
    const int one = 1;
    ::setsockopt(a->native_handle(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    a->bind(ep);
    a->listen();
    if (t == 0) ep = a->local_endpoint();
    acceptors.push_back(std::move(a));
  }
  std::printf("listening on %s:%u\n", ep.address().to_string().c_str(), ep.port());
  std::fflush(stdout);
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) {
    asio::co_spawn(*ios[t], accept_loop(*acceptors[t]), [](std::exception_ptr) {});
    pool.emplace_back([&io = *ios[t]] { io.run(); });
  }
  for (auto& th : pool)
    th.join();
}
