// Public: the HTTP request method (RFC 9110 §9), a standard method or an extension token.
#ifndef PETREL_HTTP_METHOD_H_
#define PETREL_HTTP_METHOD_H_

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/string_view.h"

namespace petrel {

// The methods RFC 9110 §9 and RFC 5789 (PATCH) define, in the order Petrel lists them (e.g. in a
// 405 response's Allow header). kExtension marks any other token.
enum class MethodKind : uint8_t {
  kGet,
  kHead,
  kPost,
  kPut,
  kDelete,
  kConnect,
  kOptions,
  kTrace,
  kPatch,
  kExtension,
};

// A method as a value: one byte for the standard methods, plus the token for extensions.
// Copyable; standard methods never allocate.
class Method {
 public:
  // Shorthands: `Method m = Method::kGet;`, `if (m == Method::kPost)`.
  static constexpr MethodKind kGet = MethodKind::kGet;
  static constexpr MethodKind kHead = MethodKind::kHead;
  static constexpr MethodKind kPost = MethodKind::kPost;
  static constexpr MethodKind kPut = MethodKind::kPut;
  static constexpr MethodKind kDelete = MethodKind::kDelete;
  static constexpr MethodKind kConnect = MethodKind::kConnect;
  static constexpr MethodKind kOptions = MethodKind::kOptions;
  static constexpr MethodKind kTrace = MethodKind::kTrace;
  static constexpr MethodKind kPatch = MethodKind::kPatch;

  // GET.
  Method() = default;
  // A standard method. `kind` must not be kExtension (use Parse for tokens); in release builds
  // a kExtension here behaves like an extension with an empty name.
  Method(MethodKind kind);  // NOLINT(google-explicit-constructor): lets Method::kGet convert.

  // Case-sensitive (RFC 9110 §9.1): "GET" is GET, "get" is an extension method. Returns
  // nullopt unless `token` is a non-empty RFC 9110 token. Standard names do not allocate.
  static std::optional<Method> Parse(absl::string_view token);

  MethodKind kind() const { return kind_; }
  bool is_extension() const { return kind_ == MethodKind::kExtension; }
  // "GET", ... or the extension token. Valid while this Method lives (static for standard ones).
  absl::string_view name() const;

  // RFC 9110 §9.2.1: GET, HEAD, OPTIONS, TRACE. Extensions are not known to be safe.
  bool IsSafe() const;
  // RFC 9110 §9.2.2: the safe methods, PUT and DELETE. Extensions are not known to be.
  bool IsIdempotent() const;

  friend bool operator==(const Method& a, const Method& b) {
    return a.kind_ == b.kind_ && a.extension_ == b.extension_;
  }
  // Standard methods in MethodKind order, then extensions by token (byte order).
  friend std::strong_ordering operator<=>(const Method& a, const Method& b) {
    if (a.kind_ != b.kind_) return a.kind_ <=> b.kind_;
    return a.extension_.compare(b.extension_) <=> 0;
  }

  template <typename H>
  friend H AbslHashValue(H h, const Method& m) {
    return H::combine(std::move(h), m.kind_, m.extension_);
  }

 private:
  Method(MethodKind kind, std::string extension) : kind_(kind), extension_(std::move(extension)) {}

  MethodKind kind_ = MethodKind::kGet;
  std::string extension_;  // Empty unless kind_ == kExtension.
};

// The name of a standard method ("GET"); "" for kExtension.
absl::string_view MethodKindName(MethodKind kind);

}  // namespace petrel

#endif  // PETREL_HTTP_METHOD_H_
