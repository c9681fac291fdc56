#include "http/websocket/handshake.h"

#include <openssl/sha.h>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "http/field_list.h"

namespace petrel::http_internal {
namespace {

constexpr absl::string_view kGuid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

}  // namespace

std::string WebSocketAccept(absl::string_view key) {
  const std::string joined = absl::StrCat(key, kGuid);
  uint8_t digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const uint8_t*>(joined.data()), joined.size(), digest);
  return absl::Base64Escape(
      absl::string_view(reinterpret_cast<const char*>(digest), sizeof(digest)));
}

absl::StatusOr<WebSocketOpening> CheckWebSocketOpening(
    const Request& req, const std::vector<std::string>& subprotocols) {
  WebSocketOpening opening;
  const HeaderMap& fields = req.headers();
  if (req.version() == HttpVersion::k11 || req.version() == HttpVersion::k10) {
    // The engine hands over Upgrade only when Connection lists it (Request::upgrade).
    if (!ListHasToken(req.upgrade(), "websocket")) {
      return absl::NotFoundError("not a WebSocket opening: no Upgrade: websocket");
    }
    if (req.method().kind() != MethodKind::kGet) {
      return absl::InvalidArgumentError("a WebSocket opening is a GET");
    }
    const auto keys = fields.GetAll("sec-websocket-key");
    std::string raw;
    if (keys.size() != 1 || !absl::Base64Unescape(absl::StripAsciiWhitespace(keys[0]), &raw) ||
        raw.size() != 16) {
      return absl::InvalidArgumentError("Sec-WebSocket-Key must be 16 bytes in base64");
    }
    opening.upgrade = true;
    opening.accept = WebSocketAccept(absl::StripAsciiWhitespace(keys[0]));
  } else {
    if (req.method().kind() != MethodKind::kConnect || req.protocol().empty()) {
      return absl::NotFoundError("not a WebSocket opening: no extended CONNECT");
    }
    if (req.protocol() != "websocket") {
      return absl::InvalidArgumentError(
          absl::StrCat("extended CONNECT for \"", req.protocol(), "\", not \"websocket\""));
    }
  }
  const auto versions = fields.GetAll("sec-websocket-version");
  if (versions.size() != 1 || absl::StripAsciiWhitespace(versions[0]) != "13") {
    return absl::FailedPreconditionError("Sec-WebSocket-Version must be 13");
  }
  // The first of the route's subprotocols the client offers (RFC 6455 §4.2.2 lets the server
  // choose by its own preference).
  for (const std::string& wanted : subprotocols) {
    if (FieldHasToken(fields, "sec-websocket-protocol", wanted)) {
      opening.subprotocol = wanted;
      break;
    }
  }
  return opening;
}

bool IsValidUtf8(absl::string_view text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const auto* end = p + text.size();
  while (p < end) {
    // ASCII runs, the common case, a byte at a time without the table below.
    if (*p < 0x80) {
      ++p;
      continue;
    }
    int more;
    uint32_t low;  // the smallest code point this length may encode (no overlongs)
    uint32_t cp;
    if ((*p & 0xE0) == 0xC0) {
      more = 1, low = 0x80, cp = *p & 0x1F;
    } else if ((*p & 0xF0) == 0xE0) {
      more = 2, low = 0x800, cp = *p & 0x0F;
    } else if ((*p & 0xF8) == 0xF0) {
      more = 3, low = 0x10000, cp = *p & 0x07;
    } else {
      return false;
    }
    if (end - p <= more) return false;
    for (int i = 1; i <= more; ++i) {
      if ((p[i] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i] & 0x3F);
    }
    if (cp < low || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    p += more + 1;
  }
  return true;
}

}  // namespace petrel::http_internal
