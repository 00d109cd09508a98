#include "gateway/app/notify.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>

namespace tollgate::app {

void notify_systemd(std::string_view state) noexcept {
  const char* path = std::getenv("NOTIFY_SOCKET");
  if (path == nullptr || *path == '\0') return;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::size_t n = std::strlen(path);
  if (n >= sizeof addr.sun_path) return;
  std::memcpy(addr.sun_path, path, n);
  if (addr.sun_path[0] == '@') addr.sun_path[0] = '\0';  // an abstract socket
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  ::sendto(fd, state.data(), state.size(), MSG_NOSIGNAL, reinterpret_cast<sockaddr*>(&addr),
           static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + n));
  ::close(fd);
}

void notify_reloading() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  const long long usec = static_cast<long long>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
  notify_systemd("RELOADING=1\nMONOTONIC_USEC=" + std::to_string(usec));
}

}  // namespace tollgate::app
