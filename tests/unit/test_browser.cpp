// What the gateway reads from browsers and sends them (docs/design.md §5 "Browsers"): Accept
// preferences, the proof-of-work cookie taken out of a Cookie line, and the challenge page
// compiled from a template, with the errors an operator's template gets.

#include <catch2/catch.hpp>

#include <string>

#include "gateway/config/error.hpp"
#include "gateway/policy/browser.hpp"
#include "gateway/policy/challenge_page.hpp"
#include "gateway/policy/cors.hpp"

using tollgate::config::pow_page_config;
using tollgate::policy::challenge_page;
using tollgate::policy::challenge_values;
using tollgate::policy::prefers_html;
using tollgate::policy::strip_cookie;

namespace {

/// `value` without cookie `name`, or "<none>" when it had none.
std::string without(std::string_view value, std::string_view name) {
  std::string out;
  return strip_cookie(value, name, out) ? out : "<none>";
}

/// An operator's template `text`, as the gateway file would give it.
pow_page_config page_of(std::string text) {
  pow_page_config c;
  c.template_path = "/etc/tollgate/page.html";
  c.template_text = std::move(text);
  c.file = "gateway.yaml";
  c.line = 7;
  return c;
}

/// The message of the error compiling `text` throws, or "<none>".
std::string error_of(std::string text) {
  try {
    challenge_page page(page_of(std::move(text)));
  } catch (const tollgate::config::error& e) {
    return e.what();
  }
  return "<none>";
}

}  // namespace

TEST_CASE("Accept: a browser's navigation prefers HTML, API clients and fetch() do not",
          "[browser]") {
  // Chromium's and Firefox's navigations.
  CHECK(
      prefers_html("text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,"
                   "image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7"));
  CHECK(prefers_html("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"));
  CHECK(prefers_html("TEXT/HTML"));
  CHECK(prefers_html(" text/html ; charset=utf-8 ; q=0.5 , application/json;q=0.4"));
  CHECK(prefers_html("application/json;q=0.9, text/html"));
  CHECK(prefers_html("text/html;q=1.000, application/json;q=1"));  // a tie goes to the page

  CHECK_FALSE(prefers_html(""));
  CHECK_FALSE(prefers_html("*/*"));  // fetch(), curl
  CHECK_FALSE(prefers_html("text/*"));
  CHECK_FALSE(prefers_html("application/json"));
  CHECK_FALSE(prefers_html("text/html;q=0.5, application/json"));
  CHECK_FALSE(prefers_html("text/html;q=0.5, application/problem+json;q=0.6"));
  CHECK_FALSE(prefers_html("text/html;q=0"));
  CHECK_FALSE(prefers_html("text/html;q=0.000"));
  // Malformed qualities count as 0, never as 1.
  CHECK_FALSE(prefers_html("text/html;q=2"));
  CHECK_FALSE(prefers_html("text/html;q=1.5"));
  CHECK_FALSE(prefers_html("text/html;q=0.5000"));
  CHECK_FALSE(prefers_html("text/html;q=-1"));
  CHECK_FALSE(prefers_html("text/html;q="));
  CHECK_FALSE(prefers_html("text/html;q=0.x"));
  CHECK_FALSE(prefers_html("text/htmlx"));
  CHECK_FALSE(prefers_html(std::string_view("text/html\0;", 11)));
  CHECK_FALSE(prefers_html(",,,;;;===,"));
}

TEST_CASE("the proof-of-work cookie comes out of a Cookie line, the rest stays", "[browser]") {
  CHECK(without("tollgate_pow=abc:1", "tollgate_pow").empty());
  CHECK(without("a=1; tollgate_pow=abc:1; b=2", "tollgate_pow") == "a=1; b=2");
  CHECK(without("tollgate_pow=x;a=1", "tollgate_pow") == "a=1");
  // The other pairs as they came, even those RFC 6265 would not allow.
  CHECK(without("a=1;  tollgate_pow = x ;b=\"q;r\"", "tollgate_pow") == "a=1;b=\"q;r\"");
  CHECK(without("a=1;;tollgate_pow=x;; b=2 ; ", "tollgate_pow") == "a=1;;; b=2");
  CHECK(without("a=1; tollgate_pow=x", "tollgate_pow") == "a=1");
  CHECK(without("tollgate_pow=1; tollgate_pow=2; c=3", "tollgate_pow") == "c=3");
  CHECK(without("tollgate_pow", "tollgate_pow").empty());  // a pair without '=' is named too
  // Look-alike names are other cookies.
  CHECK(without("my_tollgate_pow=1; tollgate_pow2=2; Tollgate_pow=3", "tollgate_pow") == "<none>");
  CHECK(without("", "tollgate_pow") == "<none>");
  CHECK(without(";;; ;", "tollgate_pow") == "<none>");
  std::string rest;
  CHECK_FALSE(strip_cookie("a=1;;b=2; ", "tollgate_pow", rest));
  CHECK(rest == "a=1;;b=2; ");  // nothing taken: nothing changed
}

TEST_CASE("the built-in challenge page: values in attributes, a CSP naming its script and style",
          "[browser]") {
  pow_page_config c;
  c.title = "Checking <you> & \"them\"";
  c.text = "It's quick.";
  const challenge_page page(c);
  challenge_values v;
  v.challenge = "AbC-_12";
  v.bits = 18;
  v.expires = 1'900'000'060;
  std::string out;
  page.render(out, v, 60, true);
  CHECK(out.find("data-challenge=\"AbC-_12\"") != std::string::npos);
  CHECK(out.find("data-difficulty=\"18\"") != std::string::npos);
  CHECK(out.find("data-ttl=\"60\"") != std::string::npos);
  CHECK(out.find("data-secure=\"1\"") != std::string::npos);
  CHECK(out.find("<title>Checking &lt;you&gt; &amp; &quot;them&quot;</title>") !=
        std::string::npos);
  CHECK(out.find("It&#39;s quick.") != std::string::npos);
  CHECK(out.find("<noscript>") != std::string::npos);
  CHECK(out.find("{{") == std::string::npos);
  CHECK(out.find("name=\"viewport\"") != std::string::npos);  // readable on a phone
  // No external resources: nothing with src= or href=.
  CHECK(out.find("src=") == std::string::npos);
  CHECK(out.find("href=") == std::string::npos);

  const std::string csp(page.content_security_policy());
  CHECK(csp.rfind("default-src 'none'; script-src 'sha256-", 0) == 0);
  CHECK(csp.find("style-src 'sha256-") != std::string::npos);
  CHECK(csp.find("worker-src blob:") != std::string::npos);
  CHECK(csp.find("unsafe-inline") == std::string::npos);
  CHECK(csp.find("unsafe-eval") == std::string::npos);

  // A plain listener, an expired challenge: no negative lifetime.
  page.render(out, v, -3, false);
  CHECK(out.find("data-secure=\"0\"") != std::string::npos);
  CHECK(out.find("data-ttl=\"0\"") != std::string::npos);
}

TEST_CASE("an operator's template: placeholders rendered, hashes of its own script and style",
          "[browser]") {
  const challenge_page page(page_of(
      "<p>{{ title }}</p><i data-c=\"{{challenge}}\" data-d=\"{{difficulty}}\">{{reason}}</i>"
      "<script>go()</script><SCRIPT type=module>two()</SCRIPT><style>p{}</style>{{expires}}"));
  challenge_values v;
  v.challenge = "c\"h";
  v.bits = 9;
  v.expires = 42;
  v.reason = tollgate::core::proof_failure::replayed;
  std::string out;
  page.render(out, v, 10, false);
  CHECK(out ==
        "<p>Checking your browser</p><i data-c=\"c&quot;h\" data-d=\"9\">replayed</i>"
        "<script>go()</script><SCRIPT type=module>two()</SCRIPT><style>p{}</style>42");
  // SHA-256 of "go()", "two()" and "p{}", as `printf %s go\(\) | openssl dgst -sha256 -binary |
  // base64` prints them.
  CHECK(page.content_security_policy() ==
        "default-src 'none'; script-src 'sha256-5KYv+PUboo5h+0+YAtGRPbwv5d/QxzHslP4YGnUaxRw=' "
        "'sha256-iMrPAWirDC2X0OhZzLsM2MRIWSmepJGI4r7D8ZlwBOw='; style-src "
        "'sha256-gG2yISYereRMiG2lMXrbiUgi0Ubw9p7QCeWcroOvy9Y='; worker-src blob:; img-src data:; "
        "base-uri 'none'; form-action 'self'; frame-ancestors 'none'");
}

TEST_CASE("a template the gateway cannot serve names the file, its line and why", "[browser]") {
  CHECK(error_of("{{challenge}} {{difficulty}}\n{{name}}") ==
        "gateway.yaml:7: pow.page.template: '/etc/tollgate/page.html' line 2: unknown "
        "placeholder {{name}} (known: title, text, challenge, difficulty, ttl, expires, secure, "
        "reason)");
  CHECK(error_of("{{challenge}}\n\n<script>\nvar d = {{difficulty}};</script>") ==
        "gateway.yaml:7: pow.page.template: '/etc/tollgate/page.html' line 4: a placeholder "
        "inside <script> (its text is hashed into the Content-Security-Policy; pass values in "
        "data- attributes)");
  CHECK(error_of("{{challenge}} <style>{{difficulty}}</style>").find("inside <style>") !=
        std::string::npos);
  CHECK(error_of("<p>{{title}}</p>") ==
        "gateway.yaml:7: pow.page.template: '/etc/tollgate/page.html' line 1: the page must "
        "contain {{challenge}} and {{difficulty}}");
  CHECK(error_of("{{challenge}} {{difficulty}} {{title").find("'{{' without '}}'") !=
        std::string::npos);
  CHECK(error_of("{{challenge}} {{difficulty}} <script>x()").find("<script> without </script>") !=
        std::string::npos);
  CHECK(error_of("{{challenge}} {{difficulty}} <script").find("unterminated <script>") !=
        std::string::npos);
  CHECK(error_of("{{challenge}} {{difficulty}} <scripts>{{title}}</scripts>") == "<none>");
}

TEST_CASE("CORS: exact origins, the answer's fields, a preflight's", "[browser]") {
  tollgate::config::cors_config c;
  c.allow_origins = {"https://app.example", "http://127.0.0.1:8080"};
  c.allow_credentials = true;
  const tollgate::policy::cors_rules rules(c);
  CHECK(rules.allows("https://app.example"));
  CHECK(rules.allows("http://127.0.0.1:8080"));
  CHECK_FALSE(rules.allows(""));
  CHECK_FALSE(rules.allows("null"));
  CHECK_FALSE(rules.allows("https://app.example.evil"));
  CHECK_FALSE(rules.allows("https://APP.example"));
  CHECK_FALSE(rules.allows("http://127.0.0.1:80800"));

  std::string out;
  rules.append_answer_fields(out, "https://app.example");
  CHECK(out ==
        "Vary: Origin\r\nAccess-Control-Allow-Origin: https://app.example\r\n"
        "Access-Control-Allow-Credentials: true\r\nAccess-Control-Expose-Headers: " +
            std::string(tollgate::policy::exposed_fields) + "\r\n");
  out.clear();
  rules.append_answer_fields(out, "");
  CHECK(out == "Vary: Origin\r\n");
  out.clear();
  rules.append_preflight_fields(out, " X-Trace-Id, content-type ");
  CHECK(
      out ==
      "Access-Control-Allow-Methods: GET, HEAD, POST, PUT, PATCH, DELETE\r\n"
      "Access-Control-Allow-Headers: X-Trace-Id, content-type, X-PoW-Solution, X-PoW-Clearance\r\n"
      "Access-Control-Max-Age: 600\r\n");
  out.clear();
  rules.append_preflight_fields(out, "x\r\nSet-Cookie: a=b");  // never echoed into a head
  CHECK(out.find("Set-Cookie") == std::string::npos);

  tollgate::config::cors_config any;
  any.allow_origins = {"*"};
  const tollgate::policy::cors_rules all(any);
  CHECK(all.allows("https://whoever.example"));
  CHECK_FALSE(all.allows(""));
  // The operator's exposed fields follow the gateway's.
  any.expose_headers = {"ETag", "Location"};
  const tollgate::policy::cors_rules exposing(any);
  out.clear();
  exposing.append_answer_fields(out, "https://whoever.example");
  CHECK(out.find("Access-Control-Expose-Headers: " + std::string(tollgate::policy::exposed_fields) +
                 ", ETag, Location\r\n") != std::string::npos);

  CHECK(tollgate::policy::is_cors_field("Access-Control-Allow-Origin"));
  CHECK(tollgate::policy::is_cors_field("access-control-expose-headers"));
  CHECK_FALSE(tollgate::policy::is_cors_field("Access-Control-"));
  CHECK_FALSE(tollgate::policy::is_cors_field("X-Access-Control-Allow-Origin"));
}
