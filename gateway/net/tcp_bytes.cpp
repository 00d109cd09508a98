#include "gateway/net/tcp_bytes.hpp"

#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

namespace tollgate::net {

bool tcp_bytes(int fd, std::uint64_t& received, std::uint64_t& acked) noexcept {
  tcp_info info;
  std::memset(&info, 0, sizeof info);
  socklen_t size = sizeof info;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &size) != 0) return false;
  // An older kernel fills less of the struct: its absent fields stay 0.
  received = info.tcpi_bytes_received;
  acked = info.tcpi_bytes_acked;
  return true;
}

}  // namespace tollgate::net
