// tollgate-echo: the demo upstream. Answers every request with JSON describing what it
// received, so a newcomer (and the integration tests) can see what the gateway forwards.
//
//   tollgate-echo [--address A] [--port N] [--threads N]
//
// Query parameters shape the answer: status=NNN, size=N (an N-byte body instead of JSON),
// chunked=1 (that body chunked), delay_ms=N (answer late), violation=REASON (report it to
// the gateway in X-Tollgate-Violation, as an application flags abuse). GET /_echo/stats returns
// {"requests":N}, the number of other requests received.

#include <sys/socket.h>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <atomic>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
constexpr auto use_tuple = asio::as_tuple(asio::deferred);

namespace {

std::atomic<std::uint64_t> served{0};

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
      res.body() = "{\"requests\":" + std::to_string(served.load()) + "}\n";
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
