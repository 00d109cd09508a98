#include "gateway/net/stream_io.hpp"

namespace tollgate::net {

error_code write_now(tcp_socket& s, std::span<asio::const_buffer>& rest) {
  error_code ec;
  std::size_t n = s.write_some(rest, ec);
  if (ec == asio::error::would_block || ec == asio::error::try_again) {
    ec = {};
    n = 0;
  }
  if (ec) return ec;
  while (!rest.empty() && n >= rest.front().size()) {
    n -= rest.front().size();
    rest = rest.subspan(1);
  }
  if (n > 0) rest.front() += n;
  return {};
}

}  // namespace tollgate::net
