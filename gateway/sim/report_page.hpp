#pragma once
/// The HTML report's page (gateway/sim/report_page.html, compiled in): its CSS and its
/// Content-Security-Policy, which lets it load nothing; "{{title}}" and "{{body}}" are filled in.

#include <string_view>

namespace tollgate::sim {

/// The page, with its two places to fill.
std::string_view report_page() noexcept;

}  // namespace tollgate::sim
