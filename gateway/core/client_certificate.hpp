#pragma once
/// What a client's verified TLS certificate says about its holder (docs/design.md §17): read
/// once per connection after the handshake, then used as a limit's key, to choose a tier and
/// in the fields forwarded upstream. Plain text, no OpenSSL type.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tollgate::core {

/// One fact of a client certificate: `key: { client_cert: subject | san | sha256 }`.
enum class certificate_field : std::uint8_t {
  subject,  ///< the subject's distinguished name
  san,      ///< the subjectAltName entries
  sha256,   ///< the certificate's SHA-256 fingerprint
};

/// The field called `name` ("subject", "san", "sha256"), or none.
constexpr std::optional<certificate_field> certificate_field_from_name(
    std::string_view name) noexcept {
  if (name == "subject") return certificate_field::subject;
  if (name == "san") return certificate_field::san;
  if (name == "sha256") return certificate_field::sha256;
  return std::nullopt;
}

/// A verified client certificate's facts, each printable ASCII (other bytes escaped as `\XX`),
/// so that a value is safe in a header field as it is.
struct client_certificate {
  /// The subject as RFC 4514 writes it, most significant last: "CN=alice,O=Example".
  std::string subject;
  /// Every DNS, email, URI and IP entry of its subjectAltName, in order, as
  /// "DNS:a.example, URI:spiffe://example/alice"; "" when it has none.
  std::string san;
  /// Lower-case hex SHA-256 of the certificate's DER bytes (64 digits): what `openssl x509
  /// -fingerprint -sha256` prints, without colons.
  std::string sha256;

  /// The value of `f`.
  std::string_view field(certificate_field f) const noexcept {
    switch (f) {
      case certificate_field::subject:
        return subject;
      case certificate_field::san:
        return san;
      case certificate_field::sha256:
        return sha256;
    }
    return {};
  }
};

}  // namespace tollgate::core
