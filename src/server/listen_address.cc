#include "server/listen_address.h"

#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace petrel::server {

absl::StatusOr<ListenAddress> ParseListenAddress(absl::string_view text) {
  auto bad = [text](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "': ", why));
  };
  ListenAddress out;
  absl::string_view host = text;
  absl::string_view port;
  bool with_port = false;
  if (!text.empty() && text.front() == '[') {  // [v6] or [v6]:port
    const size_t close = text.find(']');
    if (close == absl::string_view::npos) return bad("no ']' after an IPv6 address");
    host = text.substr(1, close - 1);
    absl::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return bad("expected ':PORT' after ']'");
      port = rest.substr(1);
      with_port = true;
    }
  } else if (const size_t colon = text.find(':');
             colon != absl::string_view::npos &&
             text.find(':', colon + 1) == absl::string_view::npos) {
    host = text.substr(0, colon);  // v4:port (a bare v6 address has several colons)
    port = text.substr(colon + 1);
    with_port = true;
  }
  absl::StatusOr<SocketAddress> ip = SocketAddress::Parse(host, 0);
  if (!ip.ok()) {
    return bad("not an IP address (IPv4, IPv6, IPV4:PORT or [IPV6]:PORT; names are not resolved)");
  }
  out.ip = *ip;
  if (with_port) {
    uint32_t p = 0;
    if (!absl::SimpleAtoi(port, &p) || p == 0 || p > 65535) return bad("bad port");
    out.port = static_cast<uint16_t>(p);
  }
  return out;
}

absl::StatusOr<std::vector<ListenAddress>> ParseListenAddresses(
    const std::vector<std::string>& texts, std::optional<uint16_t> http_port,
    std::optional<uint16_t> https_port) {
  std::vector<ListenAddress> out;
  if (texts.empty()) {
    // Loopback on both families: `localhost` may resolve to either, and browsers do not fall
    // back from ::1 to 127.0.0.1 on QUIC.
    out.push_back({*SocketAddress::Parse("127.0.0.1", 0), std::nullopt, true});
    out.push_back({*SocketAddress::Parse("::1", 0), std::nullopt, false});
    return out;
  }
  for (const std::string& text : texts) {
    absl::StatusOr<ListenAddress> a = ParseListenAddress(text);
    if (!a.ok()) return a.status();
    if (a->port.has_value() && *a->port != http_port.value_or(0) &&
        *a->port != https_port.value_or(0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", text, "': port ", *a->port,
                       " is neither the http nor the https port of the server"));
    }
    for (const ListenAddress& b : out) {
      const bool same_ports = !a->port.has_value() || !b.port.has_value() || *a->port == *b.port;
      if (a->ip == b.ip && same_ports) {
        return absl::InvalidArgumentError(absl::StrCat("'", text, "': listed twice"));
      }
    }
    out.push_back(*std::move(a));
  }
  return out;
}

std::vector<SocketAddress> AddressesFor(const std::vector<ListenAddress>& addresses,
                                        uint16_t port) {
  std::vector<SocketAddress> out;
  for (const ListenAddress& a : addresses) {
    if (a.port.has_value() && *a.port != port) continue;
    SocketAddress s = a.ip;
    s.set_port(port);
    out.push_back(s);
  }
  return out;
}

bool CanBind(const SocketAddress& ip) {
  const int fd = socket(ip.family(), SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  SocketAddress any_port = ip;
  any_port.set_port(0);
  const bool ok = bind(fd, any_port.sockaddr_ptr(), any_port.length()) == 0;
  close(fd);
  return ok;
}

}  // namespace petrel::server
