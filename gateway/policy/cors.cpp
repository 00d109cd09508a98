#include "gateway/policy/cors.hpp"

#include <algorithm>
#include <chrono>

#include "gateway/core/text.hpp"

namespace tollgate::policy {

namespace {

/// "a, b, c".
std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) {
    if (!out.empty()) out += ", ";
    out += i;
  }
  return out;
}

/// Whether `v` is a list of field names (tokens, commas, spaces): safe to echo.
bool clean_name_list(std::string_view v) noexcept {
  return v.size() <= 1024 && std::all_of(v.begin(), v.end(), [](char c) {
           return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '-' || c == '_' || c == ',' || c == ' ' || c == '.';
         });
}

void append_line(std::string& out, std::string_view name, std::string_view value) {
  out += name;
  out += ": ";
  out += value;
  out += "\r\n";
}

}  // namespace

bool is_cors_field(std::string_view name) noexcept {
  constexpr std::string_view prefix = "access-control-";
  return name.size() > prefix.size() && core::iequals(name.substr(0, prefix.size()), prefix);
}

cors_rules::cors_rules(const config::cors_config& c)
    : credentials_(c.allow_credentials),
      methods_(joined(c.allow_methods)),
      headers_(joined(c.allow_headers)),
      max_age_(std::to_string(std::chrono::duration_cast<std::chrono::seconds>(c.max_age).count())),
      exposed_(exposed_fields) {
  if (!c.expose_headers.empty()) exposed_ += ", " + joined(c.expose_headers);
  for (const auto& o : c.allow_origins) {
    if (o == "*") {
      any_ = true;
    } else {
      origins_.push_back(o);
    }
  }
}

bool cors_rules::allows(std::string_view origin) const noexcept {
  if (origin.empty()) return false;
  if (any_) return true;
  // Origins compare exactly: a browser sends the serialisation the operator listed.
  return std::find(origins_.begin(), origins_.end(), origin) != origins_.end();
}

void cors_rules::append_answer_fields(std::string& out, std::string_view origin) const {
  // The answer differs by Origin: caches must keep them apart, allowed or not.
  out += "Vary: Origin\r\n";
  if (origin.empty()) return;
  // "*" answers any origin with its own name, so that credentials and caches work alike.
  append_line(out, "Access-Control-Allow-Origin", origin);
  if (credentials_) out += "Access-Control-Allow-Credentials: true\r\n";
  append_line(out, "Access-Control-Expose-Headers", exposed_);
}

void cors_rules::append_preflight_fields(std::string& out, std::string_view request_headers) const {
  append_line(out, "Access-Control-Allow-Methods", methods_);
  out += "Access-Control-Allow-Headers: ";
  if (!headers_.empty()) {
    out += headers_;
    out += ", ";
  } else if (const std::string_view asked = core::trim(request_headers);
             !asked.empty() && clean_name_list(asked)) {
    out += asked;
    out += ", ";
  }
  out += "X-PoW-Solution, X-PoW-Clearance\r\n";
  append_line(out, "Access-Control-Max-Age", max_age_);
}

}  // namespace tollgate::policy
