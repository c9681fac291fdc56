#include "petrel/http/request.h"

#include <cstring>
#include <memory>

namespace petrel {

absl::string_view HttpVersionName(HttpVersion version) {
  switch (version) {
    case HttpVersion::k10:
      return "HTTP/1.0";
    case HttpVersion::k11:
      return "HTTP/1.1";
    case HttpVersion::k2:
      return "HTTP/2";
    case HttpVersion::k3:
      return "HTTP/3";
  }
  return "HTTP/?";
}

// Out of line: inlined into callers' stack objects, GCC 12 with sanitizers reports a false
// -Wmaybe-uninitialized inside absl::InlinedVector.
void RouteParams::Add(absl::string_view name, absl::string_view value) {
  params_.push_back({name, value});
}

absl::string_view RouteParams::Get(absl::string_view name) const {
  for (const Param& p : params_) {
    if (p.name == name) return p.value;
  }
  return absl::string_view();
}

bool RouteParams::Contains(absl::string_view name) const {
  for (const Param& p : params_) {
    if (p.name == name) return true;
  }
  return false;
}

void Request::SetTarget(absl::string_view target) {
  // memchr rather than string_view::find: inlined, vectorised, and on every request.
  const void* mark = target.empty() ? nullptr : std::memchr(target.data(), '?', target.size());
  if (mark == nullptr) {
    CopyInto(path_, target);
    query_.clear();
    return;
  }
  const size_t q = static_cast<size_t>(static_cast<const char*>(mark) - target.data());
  CopyInto(path_, target.substr(0, q));
  CopyInto(query_, target.substr(q + 1));
}

void Request::Reset() {
  method_ = Method();
  version_ = HttpVersion::k11;
  early_data_ = false;
  head_bytes_ = 0;
  path_.clear();
  query_.clear();
  authority_.clear();
  scheme_.clear();
  protocol_.clear();
  upgrade_.clear();
  headers_.Clear();
  body_.Reset();  // nothing refers to it any more (the contract of Reset)
  peer_address_.Clear();
  local_address_.Clear();
  alpn_ = absl::string_view();
  sni_ = absl::string_view();
  params_.Clear();
  route_pattern_ = absl::string_view();
  context_.Clear();
}

}  // namespace petrel
