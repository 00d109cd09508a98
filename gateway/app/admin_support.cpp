#include "gateway/app/admin_support.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/json.hpp>

#include "gateway/core/text.hpp"

namespace tollgate::app::admin {

namespace json = boost::json;

reply answer(unsigned status, const json::value& body) {
  reply r;
  r.status = status;
  r.body = json::serialize(body);
  return r;
}

reply problem(unsigned status, std::string_view detail, json::object extra) {
  std::string_view title = "Bad Request";
  switch (status) {
    case 404:
      title = "Not Found";
      break;
    case 405:
      title = "Method Not Allowed";
      break;
    case 409:
      title = "Conflict";
      break;
    case 503:
      title = "Service Unavailable";
      break;
    default:
      break;
  }
  json::object body{{"type", "about:blank"}, {"title", title}, {"status", status}};
  body["detail"] = detail;
  for (auto& [k, v] : extra)
    body[k] = std::move(v);
  reply r = answer(status, body);
  r.content_type = "application/problem+json";
  return r;
}

reply not_allowed(std::string_view allow) {
  reply r = problem(405, "use " + std::string(allow));
  r.allow = std::string(allow);
  return r;
}

std::optional<std::vector<std::pair<std::string, std::string>>> parameters(
    std::string_view query, std::initializer_list<std::string_view> known, std::string& error) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view item = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (item.empty()) continue;
    const auto eq = item.find('=');
    std::string name, value;
    if (!core::percent_decode(item.substr(0, eq), name, true) ||
        (eq != std::string_view::npos && !core::percent_decode(item.substr(eq + 1), value, true))) {
      error = "malformed query parameter \"" + printable(item) + "\"";
      return std::nullopt;
    }
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      error = "unknown query parameter \"" + printable(name) + "\"";
      return std::nullopt;
    }
    out.emplace_back(std::move(name), std::move(value));
  }
  return out;
}

std::optional<std::string> decoded(std::string_view segment) {
  std::string text;
  if (!core::percent_decode(segment, text)) return std::nullopt;
  return text;
}

std::optional<std::string> note(std::string_view text) {
  if (text.size() > 256) return std::nullopt;
  const bool clean = std::none_of(text.begin(), text.end(), [](char c) {
    return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  });
  if (!clean) return std::nullopt;
  return std::string(text);
}

std::string printable(std::string_view text) {
  std::string out(text.substr(0, 100));
  for (char& c : out) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == ':' || c == '.' || c == '/' || c == '_' || c == '%' || c == '-';
    if (!ok) c = '?';
  }
  return out;
}

void audit(const request& r, std::string_view action, std::string_view target,
           std::string_view details, unsigned status) {
  // Never the token itself: only whether one was required and presented.
  spdlog::info("admin audit: action={} target={}{}{} result={} peer={} token={}", action,
               printable(target), details.empty() ? "" : " ", details, status, r.peer,
               r.token ? "yes" : "no");
}

}  // namespace tollgate::app::admin
