#pragma once
/// A request's Beast fields as admission reads them (admission::header_source). Internal to
/// net/.

#include "gateway/admission/request_view.hpp"
#include "gateway/core/text.hpp"
#include "gateway/net/messages.hpp"

namespace tollgate::net {

/// Looks fields up in the request the connection's parser holds; points at none until
/// `of` is called for a request.
class beast_headers final : public admission::header_source {
 public:
  /// Reads the fields of `f` from now on (they outlive the request's admission).
  void of(const fields& f) noexcept { fields_ = &f; }

  std::string_view value(std::string_view name) const override {
    std::string_view found;
    scan(name, [&](std::string_view v) {
      found = v;
      return false;  // the first is enough
    });
    return found;
  }
  std::size_t count(std::string_view name) const override {
    std::size_t n = 0;
    scan(name, [&](std::string_view) { return ++n, true; });
    return n;
  }
  void each(std::string_view name, void (*f)(void*, std::string_view),
            void* context) const override {
    scan(name, [&](std::string_view v) { return f(context, v), true; });
  }

 private:
  /// Calls `f(value)` for every field `name`, in the order received, while it returns true. A
  /// walk of the list, lengths compared first: a head has a few fields, and Beast's lookup by
  /// name (its ordered set, compared without case) cost about 600 instructions a call
  /// (bench/README §10), where this costs a few per field.
  template <class F>
  void scan(std::string_view name, F&& f) const {
    for (const auto& field : *fields_) {
      const auto n = field.name_string();
      if (n.size() == name.size() && core::iequals(sv(n), name) && !f(sv(field.value()))) return;
    }
  }

  const fields* fields_ = nullptr;
};

}  // namespace tollgate::net
