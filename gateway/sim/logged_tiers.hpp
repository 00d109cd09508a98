#pragma once
/// Consumer tiers in a replay (docs/design.md §13 and §15, "Tiers"). A log line carries the
/// client's address, its target and the tier the gateway gave the request (`consumer_tier`),
/// but no token, no header and no upstream's answer. So the tier sources that read those are
/// replaced by one that reads the logged tier; the others read the line as the gateway read the
/// request. The policy's own walk (compiled_policy::tier_of, called by admission) then decides,
/// in the policy's `from:` order.

#include <string_view>

#include "gateway/config/policy.hpp"

namespace tollgate::sim {

/// The field under which a replayed request carries its logged tier, looked up as a header
/// (simulator.cpp's header source answers it). It holds a space, which no header name does:
/// no limit or route of a policy can read it.
inline constexpr std::string_view logged_tier_field = "logged consumer_tier";

/// `p` for a replay. Its tier sources that read what a log does not carry (a token's claim; a
/// key file keyed on a header, cookie, bearer token or claim; `upstream`; any other but these
/// two) give way to one key file that reads logged_tier_field and maps each tier's name to
/// itself, placed where the first of them was. The tier sources a log can feed stay where they
/// are: `network` (the logged address) and a key file keyed on a query parameter (the logged
/// target). A logged tier that is not one of `p`'s leaves the choice to the next source.
config::policy_config with_logged_tiers(config::policy_config p);

}  // namespace tollgate::sim
