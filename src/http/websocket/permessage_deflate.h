// Internal: negotiation of permessage-deflate (RFC 7692 §5, §7.1) from a client's
// Sec-WebSocket-Extensions — the same field on HTTP/1.1, HTTP/2 and HTTP/3 openings.
#ifndef PETREL_HTTP_WEBSOCKET_PERMESSAGE_DEFLATE_H_
#define PETREL_HTTP_WEBSOCKET_PERMESSAGE_DEFLATE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "petrel/http/websocket.h"

namespace petrel::http_internal {

// One element of an extension list (RFC 6455 §9.1): a name and its parameters, names lowered,
// quoted values unescaped; a parameter without "=" has no value.
struct ExtensionParam {
  std::string name;
  std::optional<std::string> value;
};
struct ExtensionOffer {
  std::string name;
  std::vector<ExtensionParam> params;
};

// Parses the field lines of Sec-WebSocket-Extensions as one list. nullopt when it breaks the
// grammar anywhere (an unterminated quote, a value that is no token, a stray character): the
// element boundaries after such an error cannot be trusted, so nothing of it is accepted.
std::optional<std::vector<ExtensionOffer>> ParseExtensionList(
    absl::Span<const absl::string_view> field_lines);

// What the server and the client agreed on for one WebSocket.
struct PermessageDeflateParams {
  bool server_no_context_takeover = false;  // the server resets its compressor per message
  bool client_no_context_takeover = false;  // the client resets its; we reset our inflater
  int server_max_window_bits = 15;          // the server's LZ77 window (9..15)
  int client_max_window_bits = 15;          // the client's (8..15)

  // The Sec-WebSocket-Extensions value that answers the offer.
  std::string ResponseValue() const;
};

// The first permessage-deflate offer in `field_lines` the server can accept under `options`
// (RFC 7692 §5.1: offers are in the client's order of preference), or nullopt: the extension
// is declined (no Sec-WebSocket-Extensions in the answer). Offers with an unknown, duplicate or
// invalid parameter are skipped, as §7.1 requires.
std::optional<PermessageDeflateParams> NegotiatePermessageDeflate(
    absl::Span<const absl::string_view> field_lines, const WebSocketDeflateOptions& options);

}  // namespace petrel::http_internal

#endif  // PETREL_HTTP_WEBSOCKET_PERMESSAGE_DEFLATE_H_
