#pragma once
/// The Asio/Beast vocabulary of the net and app modules. Asio and Beast are compiled once, in
/// gateway/asio_impl.cpp (separate compilation); only net/ and app/ include this.

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace tollgate::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;

/// Every worker's io_context runs on one thread, so the data path names its executor's type
/// exactly: no type-erased executor is copied, compared or dispatched through per operation.
using executor = asio::io_context::executor_type;
using tcp_socket = tcp::socket::rebind_executor<executor>::other;
using tcp_acceptor = tcp::acceptor::rebind_executor<executor>::other;
using timer = asio::steady_timer::rebind_executor<executor>::other;
/// A coroutine of the data path, bound to its worker's io_context.
template <class T>
using task = asio::awaitable<T, executor>;

/// The completion token of every awaited operation: errors come back as values, never thrown.
inline constexpr auto use_tuple = asio::as_tuple(asio::deferred);

/// use_tuple for an operation that a signal on `slot` may cancel (a WebSocket pump's wait for
/// its next bytes). Asio 1.81 binds a slot to use_awaitable, not to deferred.
inline auto use_tuple_cancellable(asio::cancellation_slot slot) {
  return asio::as_tuple(asio::bind_cancellation_slot(slot, asio::use_awaitable_t<executor>()));
}

}  // namespace tollgate::net
