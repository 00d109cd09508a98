#pragma once
/// The level and tier vocabulary of core, as used throughout the limiter.

#include "gateway/core/levels.hpp"

namespace tollgate::limit {
using core::address_level_count;
using core::level;
using core::level_count;
using core::level_from_name;
using core::level_name;
using core::tier;
using core::tier_name;
}  // namespace tollgate::limit
