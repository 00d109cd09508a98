#include "gateway/net/client_stream.hpp"

#include <openssl/evp.h>
#include <openssl/x509v3.h>

#include <boost/asio/ssl.hpp>

namespace tollgate::net {

namespace {

/// Appends `text` with every byte that is not printable ASCII written as `\XX` (as RFC 4514
/// escapes them): a fact goes into header fields and keys as it is.
void append_printable(std::string& out, std::string_view text) {
  constexpr char hex[] = "0123456789ABCDEF";
  for (const char c : text) {
    const auto b = static_cast<unsigned char>(c);
    if (b >= 0x20 && b < 0x7f) {
      out += c;
    } else {
      out += '\\';
      out += hex[b >> 4];
      out += hex[b & 15];
    }
  }
}

/// The subject of `cert` as RFC 4514 writes it ("CN=alice,O=Example").
std::string subject_of(X509* cert) {
  BIO* bio = BIO_new(BIO_s_mem());
  if (bio == nullptr) return {};
  X509_NAME_print_ex(bio, X509_get_subject_name(cert), 0, XN_FLAG_RFC2253);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  std::string out;
  append_printable(out, std::string_view(data, n > 0 ? static_cast<std::size_t>(n) : 0));
  BIO_free(bio);
  return out;
}

/// The DNS, email, URI and IP entries of `cert`'s subjectAltName: "DNS:a.example, IP:10.0.0.1".
std::string san_of(X509* cert) {
  std::string out;
  auto* names =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (names == nullptr) return out;
  for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* g = sk_GENERAL_NAME_value(names, i);
    const char* kind = nullptr;
    const ASN1_STRING* text = nullptr;
    switch (g->type) {
      case GEN_DNS:
        kind = "DNS:", text = g->d.dNSName;
        break;
      case GEN_EMAIL:
        kind = "email:", text = g->d.rfc822Name;
        break;
      case GEN_URI:
        kind = "URI:", text = g->d.uniformResourceIdentifier;
        break;
      case GEN_IPADD:
        kind = "IP:";
        break;
      default:
        continue;  // other names (directory names, other names) are not facts a key needs
    }
    if (!out.empty()) out += ", ";
    out += kind;
    if (text != nullptr) {
      append_printable(out,
                       std::string_view(reinterpret_cast<const char*>(ASN1_STRING_get0_data(text)),
                                        static_cast<std::size_t>(ASN1_STRING_length(text))));
      continue;
    }
    // An address: 4 or 16 bytes, written as inet_ntop would.
    const ASN1_OCTET_STRING* ip = g->d.iPAddress;
    const auto* b = ASN1_STRING_get0_data(ip);
    if (ASN1_STRING_length(ip) == 4) {
      out += asio::ip::make_address_v4(asio::ip::address_v4::bytes_type{b[0], b[1], b[2], b[3]})
                 .to_string();
    } else if (ASN1_STRING_length(ip) == 16) {
      asio::ip::address_v6::bytes_type bytes;
      std::copy(b, b + 16, bytes.begin());
      out += asio::ip::make_address_v6(bytes).to_string();
    }
  }
  GENERAL_NAMES_free(names);
  return out;
}

/// Lower-case hex SHA-256 of `cert`'s DER bytes.
std::string fingerprint_of(X509* cert) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (X509_digest(cert, EVP_sha256(), digest, &n) != 1) return {};
  constexpr char hex[] = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (unsigned int i = 0; i < n; ++i) {
    out[2 * i] = hex[digest[i] >> 4];
    out[2 * i + 1] = hex[digest[i] & 15];
  }
  return out;
}

}  // namespace

struct client_stream::tls_state {
  tls_state(tcp_socket& s, asio::ssl::context& c) : stream(s, c) {}
  asio::ssl::stream<tcp_socket&> stream;  ///< TLS over the connection's socket
};

client_stream::client_stream(tcp_socket& s) : socket_(s) {}
client_stream::~client_stream() = default;

task<error_code> client_stream::handshake(asio::ssl::context& context, beast::flat_buffer& buffer) {
  auto state = std::make_unique<tls_state>(socket_, context);
  auto [ec, used] = co_await state->stream.async_handshake(asio::ssl::stream_base::server,
                                                           buffer.data(), use_tuple);
  buffer.consume(used);
  if (ec) co_return ec;
  SSL* ssl = state->stream.native_handle();
  // A client certificate was asked for (client_ca), presented and verified: its facts, once
  // for every request of the connection. A resumed session keeps its certificate and result.
  if ((SSL_get_verify_mode(ssl) & SSL_VERIFY_PEER) != 0 &&
      SSL_get_verify_result(ssl) == X509_V_OK) {
    if (X509* cert = SSL_get1_peer_certificate(ssl); cert != nullptr) {
      peer_ = std::make_unique<peer_certificate>();
      peer_->facts = {subject_of(cert), san_of(cert), fingerprint_of(cert)};
      X509_free(cert);
    }
  }
  tls_ = std::move(state);
  co_return ec;
}

bool client_stream::alpn_h2() const noexcept {
  if (!tls_) return false;
  const unsigned char* p = nullptr;
  unsigned int n = 0;
  SSL_get0_alpn_selected(tls_->stream.native_handle(), &p, &n);
  return n == 2 && p[0] == 'h' && p[1] == '2';
}

task<std::pair<error_code, std::size_t>> client_stream::tls_read_some(
    asio::mutable_buffer b, asio::cancellation_slot wake) {
  auto [ec, n] = co_await tls_->stream.async_read_some(b, use_tuple_cancellable(wake));
  // A peer that closes without close_notify ends the stream like a plain EOF would.
  if (ec == asio::ssl::error::stream_truncated) ec = asio::error::eof;
  co_return std::pair{ec, n};
}

task<error_code> client_stream::tls_write(std::span<asio::const_buffer> pieces) {
  auto [ec, n] = co_await asio::async_write(tls_->stream, pieces, use_tuple);
  co_return ec;
}

}  // namespace tollgate::net
