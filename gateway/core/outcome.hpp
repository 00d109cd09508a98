#pragma once
/// How a request ended: one word for it across the gateway, its metrics (the `decision` label
/// of tollgate_requests_total), its access log and the simulator. The store's answer on a
/// request's limits is a limit::decision; this is what became of the request.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tollgate::core {

enum class outcome : std::uint8_t {
  allowed,         ///< forwarded: every enforced limit admitted it
  limited,         ///< 429
  challenged,      ///< 428: a proof is required, or pays to pass
  pow_passed,      ///< forwarded: a proof paid past the address levels
  banned,          ///< 403: banned
  shadow_limited,  ///< forwarded: only a shadowed limit would have rejected it
  error,           ///< 503: the limiter store did not answer
  denied,          ///< 403: on the access deny list, or an unsafe method on the penalty
                   ///< ladder's read_only step (docs/design.md §16)
  unauthorized,    ///< 401: its token was refused (docs/design.md §15, on_invalid: reject)
  under_attack     ///< 503: attack mode admits only some clients (docs/design.md §16)
};
/// Number of outcomes.
inline constexpr std::size_t outcome_count = 10;

/// The label of `o`, as metrics and the access log write it.
constexpr std::string_view outcome_name(outcome o) noexcept {
  constexpr std::string_view names[outcome_count] = {
      "allowed",        "limited", "challenged", "pow_passed",   "banned",
      "shadow_limited", "error",   "denied",     "unauthorized", "under_attack"};
  return names[static_cast<std::size_t>(o)];
}

/// Whether a request of outcome `o` went upstream.
constexpr bool forwarded(outcome o) noexcept {
  return o == outcome::allowed || o == outcome::pow_passed || o == outcome::shadow_limited;
}

}  // namespace tollgate::core
