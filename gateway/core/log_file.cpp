#include "gateway/core/log_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <stdexcept>

namespace tollgate::core {

log_file::~log_file() {
  const int fd = fd_.load();
  if (fd >= 0) ::close(fd);
}

void log_file::open(const std::string& path) {
  const int fresh = path.empty()
                        ? ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3)
                        : ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
  if (fresh < 0) {
    throw std::runtime_error("cannot open the access log " +
                             (path.empty() ? std::string("(standard output)") : path) + ": " +
                             std::strerror(errno));
  }
  const int fd = fd_.load();
  if (fd < 0) {
    fd_.store(fresh);
  } else {
    // dup3 replaces what `fd` refers to atomically: a concurrent write() goes to one or the
    // other, whole.
    ::dup3(fresh, fd, O_CLOEXEC);
    ::close(fresh);
  }
}

void log_file::write(std::string_view line) noexcept {
  const int fd = fd_.load(std::memory_order_relaxed);
  if (fd < 0) return;
  while (!line.empty()) {
    const ssize_t n = ::write(fd, line.data(), line.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    line.remove_prefix(static_cast<std::size_t>(n));
  }
}

void append_utc_time(std::string& out, std::chrono::system_clock::time_point t) {
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch());
  const std::time_t secs = static_cast<std::time_t>(us.count() / 1'000'000);
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  char buf[40];
  const int n = std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ",
                              tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                              tm.tm_sec, static_cast<int>(us.count() % 1'000'000));
  out.append(buf, static_cast<std::size_t>(n));
}

}  // namespace tollgate::core
