#pragma once
/// What the admin API's endpoints share: JSON and problem+json answers, query parameters,
/// the target in the path, and the audit line. Internal to app/.

#include <boost/json/value.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gateway/core/key_block.hpp"
#include "gateway/net/admin.hpp"

namespace tollgate::app::admin {

using reply = net::admin_server::reply;
using request = net::admin_server::request;

/// `body` as JSON with `status`.
reply answer(unsigned status, const boost::json::value& body);
/// An RFC 9457 problem: `{"type":"about:blank","title":...,"status":...,"detail":...}`, plus
/// the members of `extra`.
reply problem(unsigned status, std::string_view detail, boost::json::object extra = {});
/// 405 naming the methods `allow`ed.
reply not_allowed(std::string_view allow);

/// The query's parameters, %-decoded ('+' as a space); nullopt when one is malformed or not
/// among `known` (then `error` says which).
std::optional<std::vector<std::pair<std::string, std::string>>> parameters(
    std::string_view query, std::initializer_list<std::string_view> known, std::string& error);

/// The %-decoded path segment (an IPv6 address's colons or a CIDR's slash may come escaped).
std::optional<std::string> decoded(std::string_view segment);

/// An operator's note: at most 256 bytes, no control characters; nullopt otherwise.
std::optional<std::string> note(std::string_view text);

/// `text` made safe for a log line: at most 100 bytes, anything but [A-Za-z0-9:./_%-] as '?'.
std::string printable(std::string_view text);

/// One audit line at info level (`admin audit: action=... target=... <details> result=<status>
/// peer=<address:port> token=yes|no`): who, what, when (the line's time), with what result.
/// `details` is a string of further `key=value` fields, or "".
void audit(const request& r, std::string_view action, std::string_view target,
           std::string_view details, unsigned status);

}  // namespace tollgate::app::admin
