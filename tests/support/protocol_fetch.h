// Internal (tests): one request to an HttpServer over a chosen protocol, through an independent
// client — curl for HTTP/1.1 (cleartext and TLS) and HTTP/2 (h2c prior knowledge and TLS),
// Http3Client for HTTP/3 — and the response as tests compare it.
#ifndef PETREL_TESTS_SUPPORT_PROTOCOL_FETCH_H_
#define PETREL_TESTS_SUPPORT_PROTOCOL_FETCH_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "support/command.h"
#include "support/h3_fetch.h"

namespace petrel::testing {

enum class Protocol { kH1, kH1Tls, kH2c, kH2, kH3 };

inline std::string NameOf(Protocol p) {
  switch (p) {
    case Protocol::kH1:
      return "h1";
    case Protocol::kH1Tls:
      return "h1_tls";
    case Protocol::kH2c:
      return "h2c";
    case Protocol::kH2:
      return "h2";
    case Protocol::kH3:
      return "h3";
  }
  return "";
}

// A response: status, fields (lowercase names, in order), body.
struct Got {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> fields;
  std::string body;
  std::string error;  // why the exchange failed, if it did

  // Every value of `name`, joined with ", ".
  std::string Field(absl::string_view name) const {
    std::vector<std::string> values;
    for (const auto& [n, v] : fields) {
      if (n == name) values.push_back(v);
    }
    return absl::StrJoin(values, ", ");
  }
  bool Has(absl::string_view name) const {
    for (const auto& [n, v] : fields) {
      if (n == name) return true;
    }
    return false;
  }
};

struct FetchPorts {
  uint16_t http = 0;   // cleartext TCP: h1, h2c
  uint16_t https = 0;  // TLS and QUIC: h1 over TLS, h2, h3
};

// One request on a connection of its own. `curl_flags` are added to curl's command line (not
// used for HTTP/3). HEAD is sent with curl -I, which reads no body.
inline Got FetchOver(Protocol protocol, FetchPorts ports, const std::string& method,
                     const std::string& path,
                     const std::vector<std::pair<std::string, std::string>>& fields = {},
                     const std::string& curl_flags = "") {
  Got got;
  if (protocol == Protocol::kH3) {
    Http3Request request;
    request.method = method;
    request.path = path;
    for (const auto& [n, v] : fields) request.headers.Add(n, v);
    absl::StatusOr<Http3Response> r = FetchOverH3(ports.https, std::move(request));
    if (!r.ok()) {
      got.error = r.status().ToString();
      return got;
    }
    got.status = r->status;
    for (const auto& f : r->headers) {
      got.fields.emplace_back(absl::AsciiStrToLower(f.name), std::string(f.value));
    }
    got.body = r->body;
    return got;
  }
  const bool tls = protocol == Protocol::kH1Tls || protocol == Protocol::kH2;
  const char* flags = protocol == Protocol::kH2c  ? "--http2-prior-knowledge"
                      : protocol == Protocol::kH2 ? "--http2"
                                                  : "--http1.1";
  std::string cmd = absl::StrCat("curl -sS --max-time 30 -k -i ", flags, " ", curl_flags);
  absl::StrAppend(&cmd, method == "HEAD" ? " -I" : absl::StrCat(" -X ", method));
  for (const auto& [n, v] : fields) absl::StrAppend(&cmd, " -H '", n, ": ", v, "'");
  absl::StrAppend(&cmd, tls ? " https" : " http", "://127.0.0.1:", tls ? ports.https : ports.http,
                  path);
  const CommandResult r = RunCommand(cmd);
  if (r.exit_code != 0) {
    got.error = r.output;
    return got;
  }
  const size_t end = r.output.find("\r\n\r\n");
  if (end == std::string::npos) {
    got.error = r.output;
    return got;
  }
  got.body = r.output.substr(end + 4);
  const std::string head = r.output.substr(0, end);
  std::vector<absl::string_view> lines = absl::StrSplit(head, "\r\n");
  std::vector<absl::string_view> status_line = absl::StrSplit(lines[0], ' ');
  if (status_line.size() < 2 || !absl::SimpleAtoi(status_line[1], &got.status)) {
    got.error = r.output;
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t colon = lines[i].find(':');
    if (colon == absl::string_view::npos) continue;
    got.fields.emplace_back(absl::AsciiStrToLower(lines[i].substr(0, colon)),
                            std::string(absl::StripAsciiWhitespace(lines[i].substr(colon + 1))));
  }
  return got;
}

}  // namespace petrel::testing

#endif  // PETREL_TESTS_SUPPORT_PROTOCOL_FETCH_H_
