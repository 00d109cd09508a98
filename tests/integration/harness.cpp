#include "harness.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <thread>

namespace tollgate::test {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

child::child(std::vector<std::string> argv) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error("pipe");
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork");
  if (pid_ == 0) {
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    close(fds[1]);
    std::vector<char*> args;
    for (auto& a : argv)
      args.push_back(a.data());
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  out_ = fds[0];
}

child::~child() {
  if (!exited_) {
    kill(pid_, SIGTERM);
    for (int i = 0; i < 200; ++i) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        break;
      }
      usleep(10'000);
    }
    if (!exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  close(out_);
}

std::string child::wait_for_line(std::string_view needle, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    for (auto nl = pending_.find('\n'); nl != std::string::npos; nl = pending_.find('\n')) {
      std::string line = pending_.substr(0, nl);
      pending_.erase(0, nl + 1);
      if (line.find(needle) != std::string::npos) return line;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      throw std::runtime_error("no line with '" + std::string(needle) + "'; output: " + seen_);
    }
    pollfd p{out_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    const ssize_t n = read(out_, buf, sizeof buf);
    if (n <= 0) throw std::runtime_error("process ended; output: " + seen_);
    pending_.append(buf, static_cast<std::size_t>(n));
    seen_.append(buf, static_cast<std::size_t>(n));
  }
}

void child::signal(int sig) const {
  kill(pid_, sig);
}

int child::wait() {
  int status = 0;
  waitpid(pid_, &status, 0);
  exited_ = true;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string built(std::string_view name) {
  return std::string(TOLLGATE_BINARY_DIR) + "/" + std::string(name);
}

std::string response::header(const std::string& lower_name) const {
  const auto it = headers.find(lower_name);
  return it == headers.end() ? std::string() : it->second;
}

std::vector<response> exchange(std::uint16_t port, const std::string& raw, std::size_t count,
                               const std::string& source) {
  asio::io_context io;
  tcp::socket socket(io);
  socket.open(tcp::v4());
  socket.bind(tcp::endpoint(asio::ip::make_address(source), 0));
  socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  asio::write(socket, asio::buffer(raw));
  beast::flat_buffer buffer;
  std::vector<response> out;
  for (std::size_t i = 0; i < count; ++i) {
    http::response_parser<http::string_body> parser;
    parser.body_limit(256u << 20);
    // A response to HEAD has a head only, whatever its Content-Length says.
    if (raw.rfind("HEAD ", 0) == 0) parser.skip(true);
    beast::error_code ec;
    http::read(socket, buffer, parser, ec);
    if (ec) throw std::runtime_error("reading response " + std::to_string(i) + ": " + ec.message());
    response r;
    r.status = static_cast<int>(parser.get().result_int());
    for (const auto& f : parser.get()) {
      std::string name(f.name_string());
      for (auto& c : name)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      auto& v = r.headers[name];
      v += (v.empty() ? "" : ", ") + std::string(f.value());
    }
    r.body = parser.get().body();
    out.push_back(std::move(r));
  }
  return out;
}

response request(std::uint16_t port, const std::string& raw, const std::string& source) {
  return exchange(port, raw, 1, source).front();
}

std::string metrics_text(const gateway& gw) {
  const auto r = request(gw.admin_port, get("/metrics"));
  REQUIRE(r.status == 200);
  return r.body;
}

double sample(const std::string& text, const std::string& name) {
  const auto at = text.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + name.size() + 2));
}

std::string get(const std::string& target, const std::string& extra) {
  return "GET " + target + " HTTP/1.1\r\nHost: test\r\n" + extra + "\r\n";
}

namespace {
std::uint16_t port_after(const std::string& line, std::string_view marker) {
  const auto at = line.rfind(':');
  if (line.find(marker) == std::string::npos || at == std::string::npos) {
    throw std::runtime_error("no port in: " + line);
  }
  return static_cast<std::uint16_t>(std::stoi(line.substr(at + 1)));
}
}  // namespace

echo_server::echo_server() : process({built("tollgate-echo"), "--port", "0"}) {
  port = port_after(process.wait_for_line("listening on"), "listening on");
}

std::uint64_t echo_server::requests() {
  const auto r = request(port, get("/_echo/stats"));
  const auto colon = r.body.find(':');
  return std::stoull(r.body.substr(colon + 1));
}

gateway::gateway(const std::string& gateway_yaml, const std::string& policy_yaml,
                 std::uint16_t echo_port, std::vector<std::string> launcher)
    : echo(echo_port) {
  static std::atomic<int> counter{0};
  dir = std::filesystem::temp_directory_path() /
        ("tollgate-it-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
  std::filesystem::create_directories(dir);
  write(gateway_yaml, policy_yaml);
  for (const auto& word :
       {built("tollgate"), std::string("--config"), (dir / "gateway.yaml").string()})
    launcher.push_back(word);
  process = std::make_unique<child>(std::move(launcher));
  port = port_after(process->wait_for_line("listening on public"), "listening on public");
  admin_port = port_after(process->wait_for_line("admin listening on"), "admin listening on");
}

gateway::~gateway() {
  process.reset();
  std::filesystem::remove_all(dir);
}

void gateway::write(const std::string& gateway_yaml, const std::string& policy_yaml) {
  std::string g = gateway_yaml;
  auto replace = [&](const std::string& from, const std::string& to) {
    for (auto at = g.find(from); at != std::string::npos; at = g.find(from, at + to.size())) {
      g.replace(at, from.size(), to);
    }
  };
  replace("{policy}", (dir / "policy.yaml").string());
  replace("{echo}", "127.0.0.1:" + std::to_string(echo));
  std::ofstream(dir / "policy.yaml") << policy_yaml;
  std::ofstream(dir / "gateway.yaml") << g;
}

std::string gateway::reload(const std::string& gateway_yaml, const std::string& policy_yaml) {
  write(gateway_yaml, policy_yaml);
  process->signal(SIGHUP);
  return process->wait_for_line("reload");
}

int run_with_input(const std::vector<std::string>& argv, const std::string& input,
                   std::string& output) {
  const auto dir = std::filesystem::temp_directory_path();
  const auto in = dir / ("tollgate-in-" + std::to_string(getpid()));
  std::ofstream(in) << input;
  std::string cmd;
  for (const auto& a : argv)
    cmd += "'" + a + "' ";
  cmd += "< '" + in.string() + "' 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  char buf[4096];
  output.clear();
  while (const auto n = fread(buf, 1, sizeof buf, p))
    output.append(buf, n);
  const int status = pclose(p);
  std::filesystem::remove(in);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

std::chrono::milliseconds time_until_closed(std::uint16_t port, const std::string& raw,
                                            std::chrono::milliseconds limit) {
  asio::io_context io;
  tcp::socket socket(io);
  socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  const auto start = std::chrono::steady_clock::now();
  if (!raw.empty()) asio::write(socket, asio::buffer(raw));
  const auto deadline = start + limit;
  char buf[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::chrono::milliseconds(-1);
    pollfd p{socket.native_handle(), POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    const ssize_t n = ::recv(socket.native_handle(), buf, sizeof buf, 0);
    if (n <= 0) {
      return std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::steady_clock::now() - start);
    }
  }
}

redis_server::redis_server(std::vector<std::string> extra_args) : extra(std::move(extra_args)) {
  static std::atomic<int> counter{0};
  dir = std::filesystem::temp_directory_path() /
        ("tollgate-redis-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
  std::filesystem::create_directories(dir);
  port = free_port();
  start();
}

redis_server::~redis_server() {
  process.reset();
  std::filesystem::remove_all(dir);
}

void redis_server::start() {
  std::vector<std::string> argv = {"/usr/bin/redis-server",
                                   "--port",
                                   std::to_string(port),
                                   "--bind",
                                   "127.0.0.1",
                                   "--save",
                                   "",
                                   "--appendonly",
                                   "no",
                                   "--daemonize",
                                   "no",
                                   "--dir",
                                   dir.string(),
                                   "--enable-debug-command",
                                   "local"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  process = std::make_unique<child>(argv);
  process->wait_for_line("Ready to accept connections");
}

void redis_server::stop() {
  if (!process) return;
  process->signal(SIGKILL);
  process->wait();
  process.reset();
}

std::string redis_server::cli(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {"/usr/bin/redis-cli", "-p", std::to_string(port)};
  for (std::size_t i = 0; i + 1 < extra.size(); ++i) {
    if (extra[i] == "--requirepass") {
      argv.insert(argv.end(), {"--no-auth-warning", "-a", extra[i + 1]});
    }
  }
  argv.insert(argv.end(), args.begin(), args.end());
  std::string out;
  run_with_input(argv, "", out);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r'))
    out.pop_back();
  return out;
}

std::uint16_t free_port() {
  // Below the kernel's ephemeral range (32768-60999 by default): a port the kernel hands out
  // for port 0 is also what it gives the next outgoing connection (a gateway's to Redis, a
  // client's), which then takes it before the server the port was meant for binds it.
  static std::atomic<unsigned> next{static_cast<unsigned>(::getpid()) * 7919u};
  asio::io_context io;
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const auto port = static_cast<std::uint16_t>(20000 + next.fetch_add(1) % 12000);
    boost::system::error_code ec;
    tcp::acceptor a(io);
    a.open(tcp::v4(), ec);
    if (!ec) a.bind(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port), ec);
    if (!ec) return port;
  }
  tcp::acceptor a(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  return a.local_endpoint().port();
}

std::string fnv1a64_hex(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s)
    h = (h ^ c) * 0x100000001b3ULL;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

struct scripted_upstream::impl {
  asio::io_context io;
  tcp::acceptor acceptor{io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)};
  std::string reply;
  std::atomic<bool> stop{false};
  std::thread thread;
};

scripted_upstream::scripted_upstream(std::string reply) : impl_(std::make_unique<impl>()) {
  impl_->reply = std::move(reply);
  port = impl_->acceptor.local_endpoint().port();
  impl_->thread = std::thread([this] {
    for (;;) {
      beast::error_code ec;
      tcp::socket s(impl_->io);
      impl_->acceptor.accept(s, ec);
      if (ec || impl_->stop) return;  // the test is over
      std::string head;
      char c;
      while (head.find("\r\n\r\n") == std::string::npos &&
             asio::read(s, asio::buffer(&c, 1), ec) == 1)
        head += c;
      asio::write(s, asio::buffer(impl_->reply), ec);
      s.shutdown(tcp::socket::shutdown_both, ec);
    }
  });
}

scripted_upstream::~scripted_upstream() {
  // A blocked accept() does not notice a close from another thread: wake it with a connection.
  impl_->stop = true;
  beast::error_code ec;
  tcp::socket poke(impl_->io);
  poke.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port), ec);
  impl_->thread.join();
}

}  // namespace tollgate::test
