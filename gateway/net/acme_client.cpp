#include "gateway/net/acme_client.hpp"

#include <openssl/pem.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <boost/asio/ssl.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/json.hpp>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <stdexcept>

#include "gateway/net/acme_alpn.hpp"
#include "gateway/net/acme_keys.hpp"
#include "gateway/net/jwks_fetch.hpp"

namespace tollgate::net {

namespace {

namespace ssl = asio::ssl;
namespace json = boost::json;

/// Most bytes of an ACME server's response (a certificate chain is a few KiB).
constexpr std::size_t max_body = 1 << 20;
/// Time one exchange may take, from resolving to the last byte.
constexpr auto exchange_timeout = std::chrono::seconds(30);
/// How often an authorization or order is polled, at most, before it is given up.
constexpr int max_polls = 60;

/// An ACME server's answer.
struct response {
  unsigned status = 0;
  std::string body;
  std::string location;     ///< Location
  std::string nonce;        ///< Replay-Nonce
  std::string retry_after;  ///< Retry-After (seconds)
};

/// An order step that did not go through.
struct failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string text_of(const json::value& v, std::string_view key) {
  if (const auto* o = v.if_object()) {
    if (const auto* s = o->if_contains(key); s != nullptr && s->is_string()) {
      return std::string(s->get_string());
    }
  }
  return {};
}

json::value parse(const response& r, std::string_view what) {
  boost::system::error_code ec;
  json::value v = json::parse(r.body, ec);
  if (ec || !v.is_object()) throw failure(std::string(what) + ": the answer is not a JSON object");
  return v;
}

/// "status N: <problem detail>" for a refused request.
std::string refusal(std::string_view what, const response& r) {
  boost::system::error_code ec;
  const json::value v = json::parse(r.body, ec);
  std::string detail = ec ? std::string() : text_of(v, "type") + " " + text_of(v, "detail");
  return std::string(what) + ": status " + std::to_string(r.status) + " " + detail;
}

/// The renewal knob for tests (docs/configuration.md, "Certificates by ACME"): when
/// TOLLGATE_ACME_RENEW_AFTER_SECONDS is set, a certificate is renewed that long after its
/// notBefore instead of at two thirds of its lifetime.
std::optional<std::int64_t> renew_after_override() {
  const char* v = std::getenv("TOLLGATE_ACME_RENEW_AFTER_SECONDS");
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::max<std::int64_t>(1, std::strtoll(v, nullptr, 10));
}

// JSON made outside the coroutines: GCC 12 miscompiles string literals in initializer lists
// inside them ("array used as initializer").

/// newOrder's payload for `domains`.
std::string order_payload(const std::vector<std::string>& domains) {
  json::array identifiers;
  for (const auto& d : domains)
    identifiers.push_back(json::object{{"type", "dns"}, {"value", d}});
  return json::serialize(json::object{{"identifiers", identifiers}});
}

/// finalize's payload for the base64url `csr`.
std::string finalize_payload(const std::string& csr) {
  return json::serialize(json::object{{"csr", csr}});
}

/// newAccount's payload.
std::string account_payload(const std::string& email) {
  json::object payload{{"termsOfServiceAgreed", true}};
  if (!email.empty()) payload["contact"] = json::array{"mailto:" + email};
  return json::serialize(payload);
}

/// A JWS protected header: `jwk` (a JSON object) when not empty, else `kid`.
std::string protected_header(const std::string& nonce, const std::string& url,
                             const std::string& jwk, const std::string& kid) {
  json::object header{{"alg", "ES256"}, {"nonce", nonce}, {"url", url}};
  if (!jwk.empty()) {
    header["jwk"] = json::parse(jwk);
  } else {
    header["kid"] = kid;
  }
  return json::serialize(header);
}

/// The tls-alpn-01 certificate of `domain` and its fresh key.
std::shared_ptr<const alpn_identity> alpn_identity_for(const std::string& domain,
                                                       const std::string& authorization) {
  auto id = std::make_shared<alpn_identity>();
  auto key = acme::new_key();
  const std::string pem = acme::alpn_certificate_pem(key.get(), domain, authorization);
  std::unique_ptr<BIO, decltype(&BIO_free)> b(
      BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), BIO_free);
  id->certificate.reset(PEM_read_bio_X509(b.get(), nullptr, nullptr, nullptr));
  id->key.reset(key.release());
  if (!id->certificate) throw failure("tls-alpn-01: cannot read the challenge certificate");
  return id;
}

std::int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

struct acme_client::state : std::enable_shared_from_this<acme_client::state> {
  asio::io_context& io;
  std::string listener;
  config::acme_config acme;
  std::shared_ptr<acme_tokens> tokens;
  on_certificate installed;
  asio::steady_timer timer{io};
  bool stopped = false;
  ssl::context tls{ssl::context::tls_client};
  acme::key_ptr account{nullptr, EVP_PKEY_free};
  std::string kid;    ///< the account's URL, once known
  std::string nonce;  ///< the next Replay-Nonce to use
  json::object directory;

  state(asio::io_context& i, std::string l, config::acme_config a, std::shared_ptr<acme_tokens> t,
        on_certificate cb)
      : io(i),
        listener(std::move(l)),
        acme(std::move(a)),
        tokens(std::move(t)),
        installed(std::move(cb)) {
    if (!acme.ca.empty()) {
      tls.load_verify_file(acme.ca);
    } else {
      tls.set_default_verify_paths();
    }
    tls.set_verify_mode(ssl::verify_peer);
  }

  template <class Stream>
  asio::awaitable<response> exchange(Stream& stream, const url_parts& u, http::verb verb,
                                     const std::string& body) {
    http::request<http::string_body> req{verb, u.target, 11};
    // With the port when not 443: servers build their URLs from Host (pebble does).
    const std::string host = u.host.find(':') != std::string::npos ? "[" + u.host + "]" : u.host;
    req.set(http::field::host, u.port == "443" ? host : host + ":" + u.port);
    req.set(http::field::user_agent, "tollgate");
    req.set(http::field::connection, "close");
    if (verb == http::verb::post) req.set(http::field::content_type, "application/jose+json");
    req.body() = body;
    req.prepare_payload();
    auto [we, wn] = co_await http::async_write(stream, req, asio::as_tuple(asio::use_awaitable));
    if (we) throw failure("sending to " + u.host + ": " + we.message());
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(max_body);
    auto [re, rn] =
        co_await http::async_read(stream, buffer, parser, asio::as_tuple(asio::use_awaitable));
    if (re) throw failure("reading from " + u.host + ": " + re.message());
    const auto& m = parser.get();
    response r;
    r.status = m.result_int();
    r.body = m.body();
    r.location = std::string(m[http::field::location]);
    r.nonce = std::string(m["Replay-Nonce"]);
    r.retry_after = std::string(m[http::field::retry_after]);
    co_return r;
  }

  /// One request to `url` (GET without a body, else a POST of a JWS), on a connection of its
  /// own: orders are rare, and a connection kept would only idle.
  asio::awaitable<response> request(const std::string& url, http::verb verb,
                                    const std::string& body) {
    const auto u = parse_url(url);
    if (!u || !u->tls) throw failure("not an https:// URL: " + url);
    tcp::resolver resolver(io);
    auto [ec, results] =
        co_await resolver.async_resolve(u->host, u->port, asio::as_tuple(asio::use_awaitable));
    if (ec) throw failure("resolving " + u->host + ": " + ec.message());
    beast::ssl_stream<beast::tcp_stream> stream(io, tls);
    SSL_set_tlsext_host_name(stream.native_handle(), u->host.c_str());
    stream.set_verify_callback(ssl::host_name_verification(u->host));
    beast::get_lowest_layer(stream).expires_after(exchange_timeout);
    auto [ce, ep] = co_await beast::get_lowest_layer(stream).async_connect(
        results, asio::as_tuple(asio::use_awaitable));
    if (ce) throw failure("connecting to " + u->host + ": " + ce.message());
    auto [he] = co_await stream.async_handshake(ssl::stream_base::client,
                                                asio::as_tuple(asio::use_awaitable));
    if (he) throw failure("TLS with " + u->host + ": " + he.message());
    co_return co_await exchange(stream, *u, verb, body);
  }

  std::string endpoint(std::string_view name) const {
    const auto* v = directory.if_contains(name);
    if (v == nullptr || !v->is_string()) {
      throw failure("the directory names no " + std::string(name));
    }
    return std::string(v->get_string());
  }

  /// A signed POST (RFC 8555 §6.2): jwk for newAccount, kid afterwards; `payload` "" is a
  /// POST-as-GET. A badNonce refusal is tried once more with the nonce it brought.
  asio::awaitable<response> post(const std::string& url, const std::string& payload,
                                 bool with_jwk = false) {
    for (int attempt = 0;; ++attempt) {
      if (nonce.empty()) {
        const response r = co_await request(endpoint("newNonce"), http::verb::head, "");
        if (r.nonce.empty()) throw failure("newNonce: no Replay-Nonce");
        nonce = r.nonce;
      }
      const std::string header =
          protected_header(nonce, url, with_jwk ? acme::jwk(account.get()) : "", kid);
      nonce.clear();  // each nonce is good once
      response r =
          co_await request(url, http::verb::post, acme::jws(account.get(), header, payload));
      nonce = r.nonce;
      if (r.status == 400 && attempt == 0 &&
          r.body.find("urn:ietf:params:acme:error:badNonce") != std::string::npos) {
        spdlog::info("acme {}: badNonce, once more with a fresh nonce", listener);
        continue;
      }
      co_return r;
    }
  }

  /// Waits `retry_after` seconds (1 when absent or unreadable, at most 60).
  asio::awaitable<void> pause(const std::string& retry_after) {
    long s = std::strtol(retry_after.c_str(), nullptr, 10);
    s = std::clamp<long>(s, 1, 60);
    timer.expires_after(std::chrono::seconds(s));
    co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    if (stopped) throw failure("stopped");
  }

  /// The account key in storage, made (0600) the first time.
  void load_account() {
    std::error_code ec;
    if (!std::filesystem::exists(acme.storage, ec)) {
      std::filesystem::create_directories(acme.storage, ec);
      if (ec) throw failure("cannot make " + acme.storage + ": " + ec.message());
      ::chmod(acme.storage.c_str(), 0700);
    }
    const std::string path = acme::account_key_file(acme);
    const std::string text = acme::read_file(path);
    if (!text.empty()) {
      account = acme::read_key(text);
      return;
    }
    account = acme::new_key();
    acme::write_private(path, acme::key_pem(account.get()));
    spdlog::info("acme {}: new account key in {}", listener, path);
  }

  /// The directory, then the account (newAccount finds an existing one by its key).
  asio::awaitable<void> open_account() {
    const response d = co_await request(acme.directory, http::verb::get, "");
    if (d.status != 200) throw failure(refusal("directory", d));
    directory = parse(d, "directory").as_object();
    if (account == nullptr) load_account();
    const response a = co_await post(endpoint("newAccount"), account_payload(acme.email), true);
    if (a.status != 200 && a.status != 201) throw failure(refusal("newAccount", a));
    if (a.location.empty()) throw failure("newAccount: no Location");
    kid = a.location;
    spdlog::info("acme {}: account {} ({})", listener, kid, a.status == 201 ? "new" : "existing");
  }

  /// Proves one authorization by http-01 and waits until the server has checked it.
  asio::awaitable<void> authorize(const std::string& url) {
    const response r = co_await post(url, "");
    if (r.status != 200) throw failure(refusal("authorization", r));
    const json::value v = parse(r, "authorization");
    const std::string name = text_of(v.at("identifier"), "value");
    if (text_of(v, "status") == "valid") {
      spdlog::info("acme {}: {} already authorized", listener, name);
      co_return;
    }
    const bool alpn = acme.challenge == config::acme_challenge::tls_alpn_01;
    const std::string type = alpn ? "tls-alpn-01" : "http-01";
    std::string token, challenge;
    for (const auto& c : v.at("challenges").as_array()) {
      if (text_of(c, "type") == type) {
        token = text_of(c, "token");
        challenge = text_of(c, "url");
      }
    }
    if (token.empty() || challenge.empty()) {
      throw failure(name + ": no " + type + " challenge offered");
    }
    const std::string authorization = token + "." + acme::thumbprint(account.get());
    if (alpn) {
      acme_alpn_challenges().set(name, alpn_identity_for(name, authorization));
    } else {
      tokens->set(token, authorization);
    }
    struct untoken {
      acme_tokens& t;
      std::string token, name;
      ~untoken() {
        t.erase(token);
        acme_alpn_challenges().erase(name);
      }
    } forget{*tokens, token, name};
    const response c = co_await post(challenge, "{}");
    if (c.status != 200) throw failure(refusal("challenge", c));
    spdlog::info("acme {}: {} {} challenge ready, the server is checking", listener, name, type);
    for (int i = 0; i < max_polls; ++i) {
      const response p = co_await post(url, "");
      const std::string status =
          p.status == 200 ? text_of(parse(p, "authorization"), "status") : "";
      if (status == "valid") {
        spdlog::info("acme {}: {} authorized", listener, name);
        co_return;
      }
      if (status != "pending" && status != "processing") {
        throw failure(name + ": authorization " + (status.empty() ? refusal("poll", p) : status) +
                      ": " + p.body);
      }
      co_await pause(p.retry_after);
    }
    throw failure(name + ": authorization still pending");
  }

  /// Polls order `url` until it leaves `waiting` (pending or processing); its JSON.
  asio::awaitable<json::value> await_order(const std::string& url, response first) {
    for (int i = 0;; ++i) {
      if (first.status != 200 && first.status != 201) throw failure(refusal("order", first));
      json::value v = parse(first, "order");
      const std::string status = text_of(v, "status");
      if (status != "pending" && status != "processing") co_return v;
      if (i == max_polls) throw failure("order still " + status);
      co_await pause(first.retry_after);
      first = co_await post(url, "");
    }
  }

  /// One whole order: the certificate and its key stored.
  asio::awaitable<void> obtain() {
    co_await open_account();
    const response o = co_await post(endpoint("newOrder"), order_payload(acme.domains));
    if (o.status != 201) throw failure(refusal("newOrder", o));
    const std::string order = o.location;
    json::value v = parse(o, "newOrder");
    spdlog::info("acme {}: order {} for {} name(s)", listener, order, acme.domains.size());
    for (const auto& a : v.at("authorizations").as_array())
      co_await authorize(std::string(a.as_string()));
    const std::string finalize = text_of(v, "finalize");
    auto key = acme::new_key();
    const std::string csr = acme::base64url(acme::csr_der(key.get(), acme.domains));
    const response f = co_await post(finalize, finalize_payload(csr));
    spdlog::info("acme {}: order finalized with a new key's CSR", listener);
    v = co_await await_order(order, f);
    if (text_of(v, "status") != "valid") {
      throw failure("order " + text_of(v, "status") + ": " + json::serialize(v));
    }
    const response c = co_await post(text_of(v, "certificate"), "");
    if (c.status != 200 || c.body.find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
      throw failure(refusal("certificate download", c));
    }
    const auto files = acme::stored_files(acme);
    // The key first: a certificate is only ever beside its own key, or an older pair.
    acme::write_private(files.private_key, acme::key_pem(key.get()));
    acme::write_private(files.certificate, c.body);
    const std::int64_t not_after = acme::validity(c.body).second;
    spdlog::info("acme {}: certificate stored in {}, valid until {}", listener, files.certificate,
                 not_after);
    installed(not_after, true);
  }

  /// When the stored certificate is due for renewal (Unix seconds); 0 when there is none
  /// usable (missing, unreadable, expired).
  std::int64_t renewal_due() {
    const auto files = acme::stored_files(acme);
    const std::string chain = acme::read_file(files.certificate);
    if (chain.empty() || acme::read_file(files.private_key).empty()) return 0;
    const auto [not_before, not_after] = acme::validity(chain);
    if (not_after <= unix_now()) return 0;
    const auto knob = renew_after_override();
    return knob ? not_before + *knob : not_before + (not_after - not_before) * 2 / 3;
  }

  asio::awaitable<void> run() {
    auto self = shared_from_this();  // alive as long as the loop
    int failures = 0;
    std::mt19937_64 random{std::random_device{}()};
    {
      const std::string chain = acme::read_file(acme::stored_files(acme).certificate);
      const std::int64_t na = acme::validity(chain).second;
      if (na > unix_now()) {
        spdlog::info("acme {}: stored certificate reused, valid until {}", listener, na);
        installed(na, false);
      }
    }
    while (!stopped) {
      std::chrono::seconds wait{0};
      const std::int64_t due = renewal_due();
      const std::int64_t now = unix_now();
      if (due > now) {
        wait = std::chrono::seconds(due - now);
        spdlog::info("acme {}: renewal in {} s", listener, wait.count());
      } else {
        try {
          co_await obtain();
          failures = 0;
          // The next look at the stored certificate, a second on: never orders back to back.
          wait = std::chrono::seconds(1);
        } catch (const std::exception& e) {
          if (stopped) break;
          ++failures;
          // 1 min, 2, 4, ... up to 12 h, each between half and all of it (jitter), so that
          // replicas and restarts do not retry in step.
          const std::int64_t cap =
              std::min<std::int64_t>(60LL << std::min(failures - 1, 10), 12 * 3600);
          wait = std::chrono::seconds(
              std::uniform_int_distribution<std::int64_t>(cap / 2, cap)(random));
          spdlog::error("acme {}: order failed ({} in a row): {}; next try in {} s", listener,
                        failures, e.what(), wait.count());
        }
      }
      timer.expires_after(wait);
      co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    }
  }
};

acme_client::acme_client(asio::io_context& io, std::string listener, config::acme_config acme,
                         std::shared_ptr<acme_tokens> tokens, on_certificate installed)
    : state_(std::make_shared<state>(io, std::move(listener), std::move(acme), std::move(tokens),
                                     std::move(installed))) {
  asio::co_spawn(io, state_->run(), [](std::exception_ptr e) {
    // Every failure of an order is caught in run(); anything else is a bug, logged.
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      spdlog::error("acme: stopped: {}", x.what());
    }
  });
}

acme_client::~acme_client() {
  state_->stopped = true;
  state_->timer.cancel();
}

}  // namespace tollgate::net
