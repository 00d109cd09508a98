#include "gateway/net/snapshot.hpp"

#include <spdlog/spdlog.h>

#include "gateway/identity/setup.hpp"

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <atomic>
#include <cctype>

#include <boost/asio/ssl/context.hpp>

#include "gateway/config/error.hpp"
#include "gateway/net/acme_alpn.hpp"
#include "gateway/net/acme_keys.hpp"

namespace tollgate::net {

namespace {

std::vector<std::vector<tcp::endpoint>> resolve_all(const config::gateway_config& c) {
  asio::io_context io;
  tcp::resolver resolver(io);
  std::vector<std::vector<tcp::endpoint>> out;
  for (const auto& u : c.upstreams) {
    auto& endpoints = out.emplace_back();
    for (const auto& e : u.endpoints) {
      error_code ec;
      const auto results =
          resolver.resolve(e.host, std::to_string(e.port), tcp::resolver::numeric_service, ec);
      if (ec || results.empty()) {
        throw config::error(c.file, 0, "upstreams." + u.name + ".endpoints",
                            "cannot resolve '" + e.host + "': " + ec.message());
      }
      // The first address of a name; several names make several endpoints.
      endpoints.push_back(results.begin()->endpoint());
    }
  }
  return out;
}

}  // namespace

namespace {

/// The certificates of one TLS listener, and the names each serves (docs/design.md §17).
struct sni_set {
  std::vector<std::unique_ptr<asio::ssl::context>> contexts;  ///< one per certificate, by order
  std::vector<std::pair<std::string, std::size_t>> exact;     ///< lower-case name -> context
  /// A "*.example.com" name as "example.com" -> context: one label in front matches.
  std::vector<std::pair<std::string, std::size_t>> wildcard;

  /// The context for `name` (the client's SNI): an exact name, else a wildcard, else the first.
  std::size_t find(std::string_view name) const {
    std::string lower(name);
    for (char& ch : lower)
      ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    for (const auto& [n, i] : exact)
      if (n == lower) return i;
    const auto dot = lower.find('.');
    if (dot != std::string::npos && dot > 0) {
      const std::string_view parent = std::string_view(lower).substr(dot + 1);
      for (const auto& [n, i] : wildcard)
        if (n == parent) return i;
    }
    return 0;
  }
};

/// OpenSSL's SNI callback on a listener's first context: switches the handshake to the
/// certificate whose names hold the one asked for.
int choose_certificate(SSL* ssl, int*, void* arg) {
  const char* name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
  if (name == nullptr) return SSL_TLSEXT_ERR_OK;  // no SNI: the default
  const auto& set = *static_cast<const sni_set*>(arg);
  const std::size_t i = set.find(name);
  if (i != 0) SSL_set_SSL_CTX(ssl, set.contexts[i]->native_handle());
  return SSL_TLSEXT_ERR_OK;
}

/// The DNS names of the certificate in `ctx` (its subjectAltName, else its common name).
std::vector<std::string> names_of(SSL_CTX* ctx) {
  std::vector<std::string> out;
  X509* cert = SSL_CTX_get0_certificate(ctx);
  if (cert == nullptr) return out;
  auto* sans =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (sans != nullptr) {
    for (int i = 0; i < sk_GENERAL_NAME_num(sans); ++i) {
      const GENERAL_NAME* g = sk_GENERAL_NAME_value(sans, i);
      if (g->type != GEN_DNS) continue;
      const auto* s = g->d.dNSName;
      out.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                       static_cast<std::size_t>(ASN1_STRING_length(s)));
    }
    GENERAL_NAMES_free(sans);
  }
  if (out.empty()) {
    char cn[256];
    const int n =
        X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof cn);
    if (n > 0) out.emplace_back(cn, static_cast<std::size_t>(n));
  }
  for (auto& name : out)
    for (char& ch : name)
      ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

/// A server context with the listeners' options and no certificate yet.
std::unique_ptr<asio::ssl::context> new_context() {
  namespace ssl = asio::ssl;
  auto ctx = std::make_unique<ssl::context>(ssl::context::tls_server);
  // TLS 1.2 and 1.3 only.
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                   ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 |
                   ssl::context::single_dh_use);
  // OpenSSL's record buffers (about 34 KiB a connection) go back while a connection is idle,
  // as the plain path's buffers do (issue 8: memory per idle connection).
  SSL_CTX_set_mode(ctx->native_handle(), SSL_MODE_RELEASE_BUFFERS);
  return ctx;
}

/// One context for `files`; throws config::error naming the key of a file that does not load.
std::unique_ptr<asio::ssl::context> load_context(const config::gateway_config& c,
                                                 const config::certificate_files& files) {
  namespace ssl = asio::ssl;
  auto ctx = new_context();
  error_code ec;
  ctx->use_certificate_chain_file(files.certificate, ec);
  if (ec) {
    throw config::error(c.file, files.certificate_line, files.path + ".certificate",
                        "cannot load '" + files.certificate + "': " + ec.message());
  }
  ctx->use_private_key_file(files.private_key, ssl::context::pem, ec);
  if (ec) {
    throw config::error(c.file, files.private_key_line, files.path + ".private_key",
                        "cannot load '" + files.private_key + "': " + ec.message());
  }
  return ctx;
}

/// The context of the certificate ACME stored for `acme` (docs/design.md §17), when it loads;
/// else, when `placeholder`, one with a self-signed certificate for its names made now (clients
/// see an untrusted certificate until the first is issued, rather than no TLS at all).
std::unique_ptr<asio::ssl::context> acme_context(const config::acme_config& acme,
                                                 bool placeholder) {
  const auto files = acme::stored_files(acme);
  const std::string chain = acme::read_file(files.certificate);
  const std::string key = acme::read_file(files.private_key);
  if (!chain.empty() && !key.empty()) {
    auto ctx = new_context();
    error_code ec, ek;
    ctx->use_certificate_chain(asio::buffer(chain), ec);
    ctx->use_private_key(asio::buffer(key), asio::ssl::context::pem, ek);
    if (!ec && !ek && SSL_CTX_check_private_key(ctx->native_handle()) == 1) return ctx;
    spdlog::warn("acme: the stored certificate {} does not load; not served", files.certificate);
  }
  if (!placeholder) return nullptr;
  auto k = acme::new_key();
  const std::string pem = acme::self_signed_pem(k.get(), acme.domains, std::chrono::hours(24));
  const std::string key_text = acme::key_pem(k.get());
  auto ctx = new_context();
  ctx->use_certificate_chain(asio::buffer(pem));
  ctx->use_private_key(asio::buffer(key_text), asio::ssl::context::pem);
  return ctx;
}

/// OpenSSL's ALPN callback on a listener with http2 (docs/design.md §17): h2 when the client
/// offers it, else http/1.1 when offered; a client that offers neither goes on without ALPN
/// (HTTP/1.1).
int choose_protocol(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
                    unsigned int inlen, void*) {
  static constexpr unsigned char ours[] = "\x02h2\x08http/1.1";
  unsigned char* chosen = nullptr;
  if (SSL_select_next_proto(&chosen, outlen, ours, sizeof ours - 1, in, inlen) !=
      OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_NOACK;
  }
  *out = chosen;
  return SSL_TLSEXT_ERR_OK;
}

/// OpenSSL's ALPN callback on a listener whose ACME proves names by tls-alpn-01 (RFC 8737): a
/// handshake offering acme-tls/1 for a name with a challenge under way gets the challenge's
/// certificate (set on the connection: OpenSSL chooses the certificate after ALPN) and nothing
/// more; any other goes on as choose_protocol says (`arg`: non-null when http2 is on).
int choose_protocol_acme(SSL* ssl, const unsigned char** out, unsigned char* outlen,
                         const unsigned char* in, unsigned int inlen, void* arg) {
  static constexpr unsigned char acme_tls[] =
      "\x0a"
      "acme-tls/1";
  unsigned char* chosen = nullptr;
  if (SSL_select_next_proto(&chosen, outlen, acme_tls, sizeof acme_tls - 1, in, inlen) ==
      OPENSSL_NPN_NEGOTIATED) {
    const char* name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
    std::string lower = name == nullptr ? "" : name;
    for (char& ch : lower)
      ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    const auto identity = acme_alpn_challenges().find(lower);
    if (identity == nullptr) return SSL_TLSEXT_ERR_ALERT_FATAL;
    SSL_use_certificate(ssl, identity->certificate.get());
    SSL_use_PrivateKey(ssl, identity->key.get());
    *out = chosen;
    return SSL_TLSEXT_ERR_OK;
  }
  if (arg == nullptr) return SSL_TLSEXT_ERR_NOACK;  // no ALPN: HTTP/1.1
  return choose_protocol(ssl, out, outlen, in, inlen, nullptr);
}

/// Asks the clients of `ctx` for a certificate signed by `tls.client_ca` (docs/design.md §17);
/// throws config::error naming the key when the file does not load. Every context of a
/// listener gets the same: the SNI callback may switch a handshake to any of them, and OpenSSL
/// then verifies with the new one's store.
void ask_client_certificates(const config::gateway_config& c, const std::string& listener,
                             const config::tls_config& tls, asio::ssl::context& ctx) {
  if (tls.verify == config::client_verify::none) return;
  error_code ec;
  ctx.load_verify_file(tls.client_ca, ec);
  STACK_OF(X509_NAME)* names = ec ? nullptr : SSL_load_client_CA_file(tls.client_ca.c_str());
  if (ec || names == nullptr) {
    throw config::error(c.file, tls.client_ca_line, "listeners." + listener + ".tls.client_ca",
                        "cannot load '" + tls.client_ca +
                            "': " + (ec ? ec.message() : std::string("no certificate in it")));
  }
  // The CAs' names go in the certificate request, so that a client holding several
  // certificates picks one these sign.
  SSL_CTX_set_client_CA_list(ctx.native_handle(), names);
  int mode = SSL_VERIFY_PEER;
  if (tls.verify == config::client_verify::required) mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
  SSL_CTX_set_verify(ctx.native_handle(), mode, nullptr);
  // A session resumed must have been verified under this listener: without a session id
  // context OpenSSL refuses to resume sessions of verified clients at all.
  const std::string id = "tollgate:" + listener;
  SSL_CTX_set_session_id_context(ctx.native_handle(),
                                 reinterpret_cast<const unsigned char*>(id.data()),
                                 static_cast<unsigned>(std::min<std::size_t>(id.size(), 32)));
}

}  // namespace

std::vector<std::shared_ptr<asio::ssl::context>> make_tls_contexts(
    const config::gateway_config& c) {
  std::vector<std::shared_ptr<asio::ssl::context>> out;
  for (const auto& l : c.listeners) {
    if (!l.tls) {
      out.emplace_back();
      continue;
    }
    auto set = std::make_shared<sni_set>();
    auto add = [&](std::unique_ptr<asio::ssl::context> ctx) {
      const std::size_t i = set->contexts.size();
      set->contexts.push_back(std::move(ctx));
      ask_client_certificates(c, l.name, *l.tls, *set->contexts.back());
      for (const std::string& name : names_of(set->contexts.back()->native_handle())) {
        if (name.starts_with("*.")) {
          set->wildcard.emplace_back(name.substr(2), i);
        } else {
          set->exact.emplace_back(name, i);
        }
      }
    };
    // The ACME certificate, once issued, is the default; until then the static ones serve,
    // or a placeholder when there are none (docs/design.md §17).
    if (l.tls->acme) {
      if (auto ctx = acme_context(*l.tls->acme, l.tls->certificates.empty())) add(std::move(ctx));
    }
    for (const auto& files : l.tls->certificates)
      add(load_context(c, files));
    // Every context: SNI may switch the handshake to any of them before ALPN is chosen.
    if (l.tls->acme && l.tls->acme->challenge == config::acme_challenge::tls_alpn_01) {
      static int http2_on = 1;
      for (const auto& ctx : set->contexts)
        SSL_CTX_set_alpn_select_cb(ctx->native_handle(), choose_protocol_acme,
                                   l.http2 ? &http2_on : nullptr);
    } else if (l.http2) {
      for (const auto& ctx : set->contexts)
        SSL_CTX_set_alpn_select_cb(ctx->native_handle(), choose_protocol, nullptr);
    }
    SSL_CTX* first = set->contexts.front()->native_handle();
    if (set->contexts.size() > 1) {
      SSL_CTX_set_tlsext_servername_callback(first, choose_certificate);
      SSL_CTX_set_tlsext_servername_arg(first, set.get());
    }
    // The listener holds the first context; it keeps the others (and the names) alive.
    out.emplace_back(set, set->contexts.front().get());
  }
  return out;
}

std::vector<std::shared_ptr<asio::ssl::context>> make_upstream_contexts(
    const config::gateway_config& c) {
  namespace ssl = asio::ssl;
  std::vector<std::shared_ptr<asio::ssl::context>> out;
  for (const auto& u : c.upstreams) {
    if (!u.tls) {
      out.emplace_back();
      continue;
    }
    const config::upstream_tls_config& t = *u.tls;
    const std::string key = "upstreams." + u.name + ".tls";
    auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
    ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                     ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
    // Idle pooled connections give their record buffers back, as client connections do.
    SSL_CTX_set_mode(ctx->native_handle(), SSL_MODE_RELEASE_BUFFERS);
    error_code ec;
    if (!t.ca.empty()) {
      ctx->load_verify_file(t.ca, ec);
      if (ec) {
        throw config::error(c.file, t.ca_line, key + ".ca",
                            "cannot load '" + t.ca + "': " + ec.message());
      }
    } else {
      ctx->set_default_verify_paths(ec);  // the system's trust store
    }
    if (!t.certificate.empty()) {
      ctx->use_certificate_chain_file(t.certificate, ec);
      if (ec) {
        throw config::error(c.file, t.certificate_line, key + ".certificate",
                            "cannot load '" + t.certificate + "': " + ec.message());
      }
      ctx->use_private_key_file(t.private_key, ssl::context::pem, ec);
      if (ec) {
        throw config::error(c.file, t.private_key_line, key + ".private_key",
                            "cannot load '" + t.private_key + "': " + ec.message());
      }
    }
    ctx->set_verify_mode(t.verify ? ssl::verify_peer : ssl::verify_none);
    out.push_back(std::move(ctx));
  }
  return out;
}

namespace {

/// identity.jwt's verifier, the keys of its set it leaves out logged.
std::shared_ptr<identity::verifier> make_jwt_verifier(const config::gateway_config& c,
                                                      const policy::tenants& p) {
  std::vector<std::string> skipped;
  auto v = identity::make_verifier(c, p.claim_paths(), &skipped);
  for (const std::string& s : skipped)
    spdlog::warn("identity.jwt.jwks_file: {} left out: {}", c.identity.jwt->jwks_file, s);
  return v;
}

}  // namespace

snapshot::snapshot(config::gateway_config c, core::siphash_key key, metrics::registry& metrics,
                   policy::pow_state& pow)
    : config(std::move(c)),
      policy(config.policy, key),
      hosts(config, policy, key),
      router(config, policy, &hosts),
      page(config.pow.page),
      jwt(make_jwt_verifier(config, hosts)),
      upstream_endpoints(resolve_all(config)),
      tls(make_tls_contexts(config)),
      upstream_tls(make_upstream_contexts(config)) {
  // Every name a listener forwards a certificate's facts in is the gateway's on every listener:
  // a client of another listener cannot pose as a certified one.
  for (const auto& l : config.listeners) {
    if (!l.tls) continue;
    for (const std::string* n :
         {&l.tls->headers.subject, &l.tls->headers.san, &l.tls->headers.sha256}) {
      if (!n->empty()) certificate_fields.push_back(*n);
    }
  }
  static std::atomic<std::uint64_t> generations{0};
  generation = generations.fetch_add(1, std::memory_order_relaxed) + 1;
  // Label indices are fixed here, so that counting a request never looks a label up. With
  // hosts, a category's label names its host entry too ("" for the top level).
  const bool labelled = !hosts.empty();
  auto add = [&](const policy::compiled_policy& p, std::string_view host) {
    std::vector<std::uint16_t> tiers;
    if (const policy::tier_rules* t = p.tiers(); t != nullptr) {
      for (const auto& name : t->names)
        tiers.push_back(metrics.consumer_tiers.index(name));
      consumer_tiers = true;
    }
    for (const auto& category : p.categories()) {
      category_metric.push_back(metrics.categories.index(
          labelled ? metrics::host_category(host, category.name) : category.name));
      auto& limits = limit_metric.emplace_back();
      for (const auto& l : category.limits)
        limits.push_back(metrics.limits.index(l.name));
      tier_metric.push_back(tiers);
    }
  };
  add(policy, "");
  for (const auto& t : hosts.entries())
    add(t.policy, t.label);
  attack = policy::attack_board(category_metric.size());
  for (const auto& u : config.upstreams) {
    upstream_metric.push_back(metrics.upstreams.index(u.name));
    ejected_until.push_back(std::make_unique<std::atomic<std::int64_t>[]>(u.endpoints.size()));
  }
  for (const auto& r : policy.violations().names) {
    reason_metric.push_back(metrics.reasons.index(r));
    reason_slot.push_back(pow.slot(r));
  }
}

}  // namespace tollgate::net
