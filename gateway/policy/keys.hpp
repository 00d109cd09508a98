#pragma once
/// The values limits are keyed on, read from a request without any HTTP library type:
/// query parameters and cookies (headers and bearer tokens come straight from the fields).

#include <string>
#include <string_view>

namespace tollgate::policy {

/// The value of query parameter `name` in request target `target` (the first occurrence),
/// percent-decoded with `+` as a space, into `out`. False when the parameter is absent, empty
/// or badly escaped (the limit then does not apply: an unreadable key limits nobody, and a
/// request that mangles its key does not gain by it, since the address levels still apply).
bool query_value(std::string_view target, std::string_view name, std::string& out);

/// The value of cookie `name` in a `Cookie` field value (RFC 6265 §5.4: `a=1; b=2`), the first
/// occurrence, without surrounding double quotes; "" when absent.
std::string_view cookie_value(std::string_view cookies, std::string_view name) noexcept;

/// The next pair named `name` in `cookies`: true with its `value` (as cookie_value gives it),
/// `cookies` then left after that pair, so that a caller may go on to the next one.
bool next_cookie(std::string_view& cookies, std::string_view name,
                 std::string_view& value) noexcept;

}  // namespace tollgate::policy
