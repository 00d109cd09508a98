#pragma once
/// The admin API's overrides as JSON (docs/design.md §15, "Overrides"): what an operator PUTs,
/// what GET lists, what Redis holds for every replica. Apart from where overrides are kept
/// (overrides.hpp), so that fuzz_overrides reads them without a store.

#include <boost/json/object.hpp>

#include <optional>
#include <string>
#include <string_view>

#include "gateway/core/clock.hpp"
#include "gateway/policy/overrides.hpp"

namespace tollgate::app {

/// Unix ns `t` as RFC 3339 UTC ("2027-01-01T00:00:00Z").
std::string rfc3339(core::nanos t);
/// RFC 3339 date-time (`Z` or an offset, optional fraction) as unix ns; nullopt otherwise.
std::optional<core::nanos> parse_rfc3339(std::string_view text);

/// The override an operator wrote in `body` (a PUT at unix time `now`), or, when `stored`, one
/// as override_json wrote it (its id and creation time kept). nullopt, and `error` saying
/// what is wrong, when it is not one.
std::optional<policy::override_rule> override_from_json(std::string_view body, core::nanos now,
                                                        bool stored, std::string& error);
/// `r` as JSON: its id, target, tier or numbers, expiry and creation.
boost::json::object override_json(const policy::override_rule& r);

}  // namespace tollgate::app
