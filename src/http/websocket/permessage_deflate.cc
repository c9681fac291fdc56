#include "http/websocket/permessage_deflate.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace petrel::http_internal {
namespace {

bool IsTokenChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
         absl::string_view("!#$%&'*+-.^_`|~").find(c) != absl::string_view::npos;
}

bool IsToken(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), IsTokenChar);
}

// A cursor over the joined field value.
class Scanner {
 public:
  explicit Scanner(absl::string_view s) : s_(s) {}
  void SkipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t')) ++pos_;
  }
  bool AtEnd() const { return pos_ == s_.size(); }
  char Peek() const { return s_[pos_]; }
  void Advance() { ++pos_; }
  // A token, lowered; empty when none is here.
  std::string Token() {
    const size_t start = pos_;
    while (pos_ < s_.size() && IsTokenChar(s_[pos_])) ++pos_;
    return absl::AsciiStrToLower(s_.substr(start, pos_ - start));
  }
  // A quoted-string (RFC 9110 §5.6.4), the opening quote under the cursor; false when it is
  // not terminated.
  bool Quoted(std::string* out) {
    ++pos_;
    while (pos_ < s_.size()) {
      char c = s_[pos_++];
      if (c == '"') return true;
      if (c == '\\') {
        if (pos_ == s_.size()) return false;
        c = s_[pos_++];
      }
      out->push_back(c);
    }
    return false;
  }

 private:
  absl::string_view s_;
  size_t pos_ = 0;
};

// RFC 7692 §7.1.2: a decimal 8..15 without leading zeros.
std::optional<int> WindowBits(absl::string_view v) {
  if (v.size() == 1 && (v[0] == '8' || v[0] == '9')) return v[0] - '0';
  if (v.size() == 2 && v[0] == '1' && v[1] >= '0' && v[1] <= '5') return 10 + (v[1] - '0');
  return std::nullopt;
}

// What one permessage-deflate offer asks for, or nullopt when it is invalid (§7.1: decline).
struct Offer {
  bool server_no_context_takeover = false;
  bool client_no_context_takeover = false;
  std::optional<int> server_max_window_bits;
  bool client_max_window_bits = false;  // the client can honour a limit on its window
  std::optional<int> client_max_window_bits_value;
};

std::optional<Offer> ReadOffer(const ExtensionOffer& e) {
  Offer o;
  bool seen[4] = {false, false, false, false};
  for (const ExtensionParam& p : e.params) {
    int index;
    if (p.name == "server_no_context_takeover") {
      index = 0;
      if (p.value.has_value()) return std::nullopt;
      o.server_no_context_takeover = true;
    } else if (p.name == "client_no_context_takeover") {
      index = 1;
      if (p.value.has_value()) return std::nullopt;
      o.client_no_context_takeover = true;
    } else if (p.name == "server_max_window_bits") {
      index = 2;
      if (!p.value.has_value()) return std::nullopt;
      o.server_max_window_bits = WindowBits(*p.value);
      if (!o.server_max_window_bits.has_value()) return std::nullopt;
    } else if (p.name == "client_max_window_bits") {
      index = 3;
      o.client_max_window_bits = true;
      if (p.value.has_value()) {
        o.client_max_window_bits_value = WindowBits(*p.value);
        if (!o.client_max_window_bits_value.has_value()) return std::nullopt;
      }
    } else {
      return std::nullopt;  // unknown parameter
    }
    if (seen[index]) return std::nullopt;  // duplicate
    seen[index] = true;
  }
  return o;
}

}  // namespace

std::optional<std::vector<ExtensionOffer>> ParseExtensionList(
    absl::Span<const absl::string_view> field_lines) {
  // Field lines of a list-valued field join with commas (RFC 9110 §5.3).
  const std::string joined = absl::StrJoin(field_lines, ",");
  Scanner s(joined);
  std::vector<ExtensionOffer> offers;
  for (;;) {
    s.SkipSpace();
    if (s.AtEnd()) return offers;
    if (s.Peek() == ',') {  // empty list elements are allowed (RFC 9110 §5.6.1)
      s.Advance();
      continue;
    }
    ExtensionOffer offer;
    offer.name = s.Token();
    if (offer.name.empty()) return std::nullopt;
    for (;;) {
      s.SkipSpace();
      if (s.AtEnd()) break;
      if (s.Peek() == ',') {
        s.Advance();
        break;
      }
      if (s.Peek() != ';') return std::nullopt;
      s.Advance();
      s.SkipSpace();
      ExtensionParam param;
      param.name = s.Token();
      if (param.name.empty()) return std::nullopt;
      s.SkipSpace();
      if (!s.AtEnd() && s.Peek() == '=') {
        s.Advance();
        s.SkipSpace();
        std::string value;
        if (!s.AtEnd() && s.Peek() == '"') {
          // RFC 6455 §9.1: unquoted, the value must still be a token.
          if (!s.Quoted(&value) || !IsToken(value)) return std::nullopt;
        } else {
          value = s.Token();
          if (value.empty()) return std::nullopt;
        }
        param.value = std::move(value);
      }
      offer.params.push_back(std::move(param));
    }
    offers.push_back(std::move(offer));
  }
}

std::string PermessageDeflateParams::ResponseValue() const {
  std::string v = "permessage-deflate";
  if (server_no_context_takeover) v += "; server_no_context_takeover";
  if (client_no_context_takeover) v += "; client_no_context_takeover";
  if (server_max_window_bits < 15)
    absl::StrAppend(&v, "; server_max_window_bits=", server_max_window_bits);
  if (client_max_window_bits < 15)
    absl::StrAppend(&v, "; client_max_window_bits=", client_max_window_bits);
  return v;
}

std::optional<PermessageDeflateParams> NegotiatePermessageDeflate(
    absl::Span<const absl::string_view> field_lines, const WebSocketDeflateOptions& options) {
  if (!options.enabled) return std::nullopt;
  const std::optional<std::vector<ExtensionOffer>> offers = ParseExtensionList(field_lines);
  if (!offers.has_value()) return std::nullopt;
  // zlib's raw deflate refuses an 8-bit window (see WebSocketDeflateOptions): 9 is our least.
  const int server_bits = std::clamp(options.server_max_window_bits, 9, 15);
  const int client_bits = std::clamp(options.client_max_window_bits, 8, 15);
  for (const ExtensionOffer& e : *offers) {
    if (e.name != "permessage-deflate") continue;
    const std::optional<Offer> o = ReadOffer(e);
    if (!o.has_value()) continue;
    PermessageDeflateParams p;
    p.server_no_context_takeover =
        o->server_no_context_takeover || options.server_no_context_takeover;
    p.client_no_context_takeover =
        o->client_no_context_takeover || options.client_no_context_takeover;
    // §7.1.2.1: the answer may only lower what the client allows us. A client that allows 8
    // only cannot be served: declining this offer lets a later one (or none) apply.
    p.server_max_window_bits = std::min(server_bits, o->server_max_window_bits.value_or(15));
    if (p.server_max_window_bits < 9) continue;
    // §7.1.2.2: without client_max_window_bits in the offer the client may use 15 bits and the
    // answer must not limit it; a route that will not inflate with that large a window
    // declines such offers.
    if (o->client_max_window_bits) {
      p.client_max_window_bits =
          std::min(client_bits, o->client_max_window_bits_value.value_or(15));
    } else if (client_bits < 15) {
      continue;
    }
    return p;
  }
  return std::nullopt;
}

}  // namespace petrel::http_internal
