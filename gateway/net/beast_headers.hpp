#pragma once
/// A request's Beast fields as admission reads them (admission::header_source). Internal to
/// net/.

#include "gateway/admission/request_view.hpp"
#include "gateway/net/messages.hpp"

namespace tollgate::net {

/// Looks fields up in the request the connection's parser holds; points at none until
/// `of` is called for a request.
class beast_headers final : public admission::header_source {
 public:
  /// Reads the fields of `f` from now on (they outlive the request's admission).
  void of(const fields& f) noexcept { fields_ = &f; }

  std::string_view value(std::string_view name) const override {
    const auto it = fields_->find(beast::string_view(name.data(), name.size()));
    return it == fields_->end() ? std::string_view() : sv(it->value());
  }
  std::size_t count(std::string_view name) const override {
    return fields_->count(beast::string_view(name.data(), name.size()));
  }
  void each(std::string_view name, void (*f)(void*, std::string_view),
            void* context) const override {
    const auto [first, last] = fields_->equal_range(beast::string_view(name.data(), name.size()));
    for (auto it = first; it != last; ++it)
      f(context, sv(it->value()));
  }

 private:
  const fields* fields_ = nullptr;
};

}  // namespace tollgate::net
