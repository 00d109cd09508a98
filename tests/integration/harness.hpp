#pragma once
// Integration test support: real processes on loopback ports, and a real HTTP client.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tollgate::test {

/// A child process whose standard output can be read line by line. Stopped with SIGTERM (then
/// SIGKILL) when destroyed.
class child {
 public:
  explicit child(std::vector<std::string> argv);
  ~child();
  child(const child&) = delete;
  child& operator=(const child&) = delete;

  /// Reads output until a line contains `needle` and returns that line; throws on timeout or
  /// when the process exits first.
  std::string wait_for_line(std::string_view needle,
                            std::chrono::milliseconds timeout = std::chrono::seconds(10));
  /// Sends `sig`.
  void signal(int sig) const;
  /// Waits for the exit and returns the exit status (128 + signal when killed).
  int wait();
  /// Everything read from its output so far.
  const std::string& output() const { return seen_; }
  /// Its process id.
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  std::string pending_;
  std::string seen_;
  bool exited_ = false;
};

/// Path of a program built by this project (build/tollgate, build/tollgate-echo).
std::string built(std::string_view name);

/// An HTTP response as received.
struct response {
  int status = 0;
  std::map<std::string, std::string> headers;  ///< names in lower case; repeats joined ", "
  std::string body;
  /// The header's value, or "" when absent.
  std::string header(const std::string& lower_name) const;
};

/// Sends `raw` (one or more requests) over one new connection from `source` to 127.0.0.1:port
/// and reads `count` responses.
std::vector<response> exchange(std::uint16_t port, const std::string& raw, std::size_t count = 1,
                               const std::string& source = "127.0.0.1");

/// One request over a new connection.
response request(std::uint16_t port, const std::string& raw,
                 const std::string& source = "127.0.0.1");

/// A GET request for `target` with extra header lines (each ending in \r\n).
std::string get(const std::string& target, const std::string& extra = "");

/// A running tollgate-echo.
struct echo_server {
  echo_server();
  child process;
  std::uint16_t port = 0;
  /// Requests it has answered (not counting this question).
  std::uint64_t requests();
};

/// A running tollgate with a gateway file and a policy file written for the test.
struct gateway {
  /// `gateway_yaml` may say {policy} (path of the policy file) and {echo} (host:port).
  /// `launcher`, when given, runs tollgate (e.g. {"prlimit", "--nofile=200:200"}).
  gateway(const std::string& gateway_yaml, const std::string& policy_yaml, std::uint16_t echo_port,
          std::vector<std::string> launcher = {});
  ~gateway();
  /// Rewrites the gateway and policy files (same placeholders) and sends SIGHUP; waits for the
  /// log line that says how the reload went and returns it.
  std::string reload(const std::string& gateway_yaml, const std::string& policy_yaml);
  std::filesystem::path dir;
  std::uint16_t echo = 0;
  std::unique_ptr<child> process;
  std::uint16_t port = 0;
  std::uint16_t admin_port = 0;

 private:
  void write(const std::string& gateway_yaml, const std::string& policy_yaml);
};

/// Runs `argv` with `input` on its standard input; returns the exit status and fills `output`.
int run_with_input(const std::vector<std::string>& argv, const std::string& input,
                   std::string& output);

/// Connects to 127.0.0.1:port, sends `raw`, reads (and drops) whatever comes back, and
/// returns how long it took the server to close the connection, or -1 ms if it had not
/// closed it within `limit`.
std::chrono::milliseconds time_until_closed(std::uint16_t port, const std::string& raw,
                                            std::chrono::milliseconds limit);

/// A hand-written upstream on a loopback port: for each connection it reads one request head,
/// writes `reply` as it is (possibly nothing) and closes. For what tollgate-echo will not do.
class scripted_upstream {
 public:
  explicit scripted_upstream(std::string reply);
  ~scripted_upstream();
  scripted_upstream(const scripted_upstream&) = delete;
  scripted_upstream& operator=(const scripted_upstream&) = delete;
  std::uint16_t port = 0;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// A redis-server (Debian's) on a free loopback port, persisting nothing, in a directory of
/// its own; stopped (SIGTERM) when destroyed. DEBUG commands are enabled for local clients.
struct redis_server {
  /// `extra` goes on its command line (e.g. {"--requirepass", "secret"}).
  explicit redis_server(std::vector<std::string> extra = {});
  ~redis_server();
  redis_server(const redis_server&) = delete;
  redis_server& operator=(const redis_server&) = delete;
  /// Starts it again on the same port after stop() (or a kill).
  void start();
  /// Stops it (SIGKILL: as a crash would).
  void stop();
  /// Runs redis-cli with `args` against it and returns its output, trailing newline removed.
  std::string cli(const std::vector<std::string>& args) const;
  std::uint16_t port = 0;
  std::filesystem::path dir;
  std::vector<std::string> extra;
  std::unique_ptr<child> process;
};

/// The Prometheus text of `gw`'s admin listener (`/metrics`), checked to have been served.
std::string metrics_text(const gateway& gw);

/// The value of the sample `name` (labels included, exactly) in the Prometheus `text`, or -1
/// when there is none.
double sample(const std::string& text, const std::string& name);

/// A loopback TCP port that was free a moment ago.
std::uint16_t free_port();

/// FNV-1a 64 as lower-case hex (what tollgate-echo reports of a body).
std::string fnv1a64_hex(std::string_view s);

}  // namespace tollgate::test
