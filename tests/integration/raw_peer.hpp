#pragma once
// Raw-byte peers for hostile-input tests: a client that sends exactly the bytes it is given
// and reads what comes back, and an upstream whose every connection runs a test's own script.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace tollgate::test {

/// A blocking TCP client on loopback that writes raw bytes and reads raw bytes.
class raw_client {
 public:
  /// Connects from `source` to 127.0.0.1:port.
  explicit raw_client(std::uint16_t port, const std::string& source = "127.0.0.1");
  ~raw_client();
  raw_client(const raw_client&) = delete;
  raw_client& operator=(const raw_client&) = delete;

  /// Sends all of `bytes`; false when the peer closed or reset the connection.
  bool send(std::string_view bytes);
  /// Reads one HTTP/1.1 response (status line, fields, a Content-Length or chunked body)
  /// within `limit`; status 0 when the connection ended or timed out first.
  struct reply {
    int status = 0;
    std::string head;  ///< status line and fields, as received
    std::string body;  ///< the body, de-chunked
  };
  reply read_response(std::chrono::milliseconds limit = std::chrono::seconds(5));
  /// Whether the server closes (or resets) the connection within `limit`, discarding
  /// anything it sends first.
  bool closed_within(std::chrono::milliseconds limit);
  /// The socket.
  int fd() const { return fd_; }

 private:
  /// Reads more into pending_ within the deadline; false on close, error or timeout.
  bool fill(std::chrono::steady_clock::time_point deadline);
  int fd_ = -1;
  std::string pending_;
};

/// An upstream on a loopback port that runs `script(fd, n)` on a thread of its own for the
/// n-th connection (from 0) it accepts; the socket is closed when the script returns.
class fault_upstream {
 public:
  using script = std::function<void(int fd, int n)>;
  explicit fault_upstream(script s);
  ~fault_upstream();
  fault_upstream(const fault_upstream&) = delete;
  fault_upstream& operator=(const fault_upstream&) = delete;
  std::uint16_t port = 0;
  /// Connections accepted so far.
  int connections() const;

  /// Helpers for scripts: reads one request head (through the blank line) from `fd`, with
  /// `leftover` carrying bytes read past it; "" when the connection ended first.
  static std::string read_head(int fd, std::string& leftover);
  /// Writes all of `bytes` to `fd`; false when the peer closed or reset the connection.
  static bool write_all(int fd, std::string_view bytes);

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace tollgate::test
