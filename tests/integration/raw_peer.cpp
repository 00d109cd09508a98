#include "raw_peer.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

namespace tollgate::test {

namespace {

sockaddr_in loopback(const std::string& address, std::uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  if (inet_pton(AF_INET, address.c_str(), &a.sin_addr) != 1) {
    throw std::runtime_error("bad address " + address);
  }
  return a;
}

int left_ms(std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return left.count() < 0 ? 0 : static_cast<int>(left.count());
}

}  // namespace

raw_client::raw_client(std::uint16_t port, const std::string& source) {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  const sockaddr_in from = loopback(source, 0);
  const sockaddr_in to = loopback("127.0.0.1", port);
  if (::bind(fd_, reinterpret_cast<const sockaddr*>(&from), sizeof from) != 0 ||
      ::connect(fd_, reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0) {
    ::close(fd_);
    throw std::runtime_error("connect failed");
  }
  const int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

raw_client::~raw_client() {
  ::close(fd_);
}

bool raw_client::send(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

bool raw_client::fill(std::chrono::steady_clock::time_point deadline) {
  pollfd p{fd_, POLLIN, 0};
  if (::poll(&p, 1, left_ms(deadline)) <= 0) return false;
  char buf[16384];
  const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
  if (n <= 0) return false;
  pending_.append(buf, static_cast<std::size_t>(n));
  return true;
}

raw_client::reply raw_client::read_response(std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  reply r;
  std::size_t end;
  while ((end = pending_.find("\r\n\r\n")) == std::string::npos) {
    if (!fill(deadline)) return r;
  }
  const std::string head = pending_.substr(0, end + 4);
  pending_.erase(0, end + 4);
  std::string lower = head;
  for (auto& c : lower)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (const auto at = lower.find("content-length:"); at != std::string::npos) {
    const std::size_t length = std::stoul(lower.substr(at + 15));
    while (pending_.size() < length) {
      if (!fill(deadline)) return r;
    }
    r.body = pending_.substr(0, length);
    pending_.erase(0, length);
  } else if (lower.find("transfer-encoding: chunked") != std::string::npos) {
    for (;;) {
      std::size_t eol;
      while ((eol = pending_.find("\r\n")) == std::string::npos) {
        if (!fill(deadline)) return r;
      }
      const std::size_t size = std::stoul(pending_.substr(0, eol), nullptr, 16);
      while (pending_.size() < eol + 2 + size + 2) {
        if (!fill(deadline)) return r;
      }
      r.body += pending_.substr(eol + 2, size);
      pending_.erase(0, eol + 2 + size + 2);
      if (size == 0) break;
    }
  }
  r.head = head;
  r.status = std::stoi(head.substr(9, 3));
  return r;
}

bool raw_client::closed_within(std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, left_ms(deadline)) <= 0) return false;
    char buf[16384];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) return true;
  }
}

struct fault_upstream::impl {
  int listener = -1;
  script run;
  std::atomic<int> accepted{0};
  std::atomic<bool> stop{false};
  std::thread acceptor;
  std::mutex mutex;
  std::vector<std::thread> handlers;
};

fault_upstream::fault_upstream(script s) : impl_(std::make_unique<impl>()) {
  impl_->run = std::move(s);
  impl_->listener = ::socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  ::setsockopt(impl_->listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a = loopback("127.0.0.1", 0);
  socklen_t len = sizeof a;
  if (::bind(impl_->listener, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(impl_->listener, 64) != 0 ||
      ::getsockname(impl_->listener, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    throw std::runtime_error("fault_upstream: cannot listen");
  }
  port = ntohs(a.sin_port);
  impl_->acceptor = std::thread([this] {
    for (;;) {
      const int fd = ::accept(impl_->listener, nullptr, nullptr);
      if (fd < 0 || impl_->stop) {
        if (fd >= 0) ::close(fd);
        return;
      }
      const int n = impl_->accepted++;
      const std::lock_guard lock(impl_->mutex);
      impl_->handlers.emplace_back([this, fd, n] {
        impl_->run(fd, n);
        ::close(fd);
      });
    }
  });
}

fault_upstream::~fault_upstream() {
  impl_->stop = true;
  ::shutdown(impl_->listener, SHUT_RDWR);  // wakes the blocked accept()
  impl_->acceptor.join();
  ::close(impl_->listener);
  for (auto& t : impl_->handlers)
    t.join();
}

int fault_upstream::connections() const {
  return impl_->accepted.load();
}

std::string fault_upstream::read_head(int fd, std::string& leftover) {
  std::string data = std::move(leftover);
  leftover.clear();
  for (;;) {
    if (const auto end = data.find("\r\n\r\n"); end != std::string::npos) {
      leftover = data.substr(end + 4);
      return data.substr(0, end + 4);
    }
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 10'000) <= 0) return "";
    char buf[16384];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return "";
    data.append(buf, static_cast<std::size_t>(n));
  }
}

bool fault_upstream::write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

}  // namespace tollgate::test
