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

/// The completion token of every awaited operation: errors come back as values, never thrown.
inline constexpr auto use_tuple = asio::as_tuple(asio::deferred);

}  // namespace tollgate::net
