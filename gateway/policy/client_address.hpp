#pragma once
/// Which address a request is charged to (docs/design.md §7): the socket peer, or, when the peer is
/// a trusted proxy, the first untrusted hop of X-Forwarded-For read right to left.

#include <span>
#include <string_view>

#include "gateway/core/address.hpp"

namespace tollgate::policy {

/// The client address of a request from `peer` carrying the X-Forwarded-For field values
/// `forwarded` (in the order received; several fields count as one list). A header from an
/// untrusted peer is ignored; a malformed entry stops the walk at the last trusted hop.
core::address client_address(const core::address& peer, std::span<const std::string_view> forwarded,
                             std::span<const core::cidr> trusted) noexcept;

}  // namespace tollgate::policy
