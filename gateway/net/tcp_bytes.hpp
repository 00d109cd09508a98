#pragma once
/// The kernel's byte counts of a TCP socket (TCP_INFO), apart from Asio's headers: glibc's
/// <netinet/tcp.h>, which they include, has an old struct tcp_info without them.

#include <cstdint>

namespace tollgate::net {

/// Bytes received on socket `fd`, and bytes sent and acknowledged by the peer (Linux 4.2+).
/// False when the kernel cannot say (not a TCP socket, closed).
bool tcp_bytes(int fd, std::uint64_t& received, std::uint64_t& acked) noexcept;

}  // namespace tollgate::net
