#include "server/access_log.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "petrel/http/request_id.h"

namespace petrel::server {
namespace {

constexpr char kHex[] = "0123456789abcdef";

absl::string_view ProtocolText(const RequestRecord& r) {
  switch (r.protocol) {
    case HttpProtocol::kHttp1:
      return r.request != nullptr && r.request->version() == HttpVersion::k10 ? "HTTP/1.0"
                                                                              : "HTTP/1.1";
    case HttpProtocol::kHttp2:
      return "HTTP/2";
    case HttpProtocol::kHttp3:
      return "HTTP/3";
  }
  return "HTTP/1.1";
}

// The client's address without its port, into `buf` (no allocation).
absl::string_view ClientText(const SocketAddress* peer, char (&buf)[INET6_ADDRSTRLEN]) {
  if (peer == nullptr) return "-";
  const void* addr = nullptr;
  if (peer->family() == AF_INET) {
    addr = &reinterpret_cast<const sockaddr_in*>(peer->sockaddr_ptr())->sin_addr;
  } else if (peer->family() == AF_INET6) {
    addr = &reinterpret_cast<const sockaddr_in6*>(peer->sockaddr_ptr())->sin6_addr;
  } else {
    return "-";
  }
  if (inet_ntop(peer->family(), addr, buf, sizeof(buf)) == nullptr) return "-";
  return buf;
}

// Wall-clock seconds formatted once per second per thread: most requests reuse them.
struct TimeTexts {
  time_t second = -1;
  char clf[80] = {};  // 02/Dec/2026:01:50:00 +0000 (sized for any int, to please -Wformat)
  char iso[80] = {};  // 2026-12-02T01:50:00
};

const TimeTexts& TimesFor(time_t second) {
  thread_local TimeTexts t;
  if (t.second != second) {
    static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                              "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    std::tm tm{};
    gmtime_r(&second, &tm);
    std::snprintf(t.clf, sizeof(t.clf), "%02d/%s/%04d:%02d:%02d:%02d +0000", tm.tm_mday,
                  kMonths[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
    std::snprintf(t.iso, sizeof(t.iso), "%04d-%02d-%02dT%02d:%02d:%02d", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
    t.second = second;
  }
  return t;
}

// The length of the valid UTF-8 sequence at the start of `s` (RFC 3629: no overlongs, no
// surrogates, at most U+10FFFF), or 0.
size_t Utf8SequenceLength(absl::string_view s) {
  const auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char c = b(0);
  size_t n = 0;
  unsigned char lo = 0x80;
  unsigned char hi = 0xbf;
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;
    if (c == 0xed) hi = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;
    if (c == 0xf4) hi = 0x8f;
  } else {
    return 0;
  }
  if (s.size() < n) return 0;
  if (b(1) < lo || b(1) > hi) return 0;
  for (size_t i = 2; i < n; ++i) {
    if (b(i) < 0x80 || b(i) > 0xbf) return 0;
  }
  return n;
}

// Common Log Format has no escaping rule of its own; quote, backslash, controls and non-ASCII
// bytes become \xHH so a line stays one line and its quoted field stays one field.
void AppendClfEscaped(absl::string_view bytes, std::string* out) {
  for (const char ch : bytes) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') {
      const char esc[4] = {'\\', 'x', kHex[c >> 4], kHex[c & 0xf]};
      out->append(esc, 4);
    } else {
      out->push_back(ch);
    }
  }
}

void AppendDuration(Duration d, std::string* out) {
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(d).count();
  char buf[32];
  const int n = std::snprintf(buf, sizeof(buf), "%lld.%06lld", static_cast<long long>(us / 1000000),
                              static_cast<long long>(us % 1000000));
  out->append(buf, static_cast<size_t>(n));
}

}  // namespace

void AppendJsonEscaped(absl::string_view bytes, std::string* out) {
  size_t i = 0;
  while (i < bytes.size()) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c >= 0x80) {
      if (const size_t n = Utf8SequenceLength(bytes.substr(i)); n > 0) {
        out->append(bytes.data() + i, n);
        i += n;
        continue;
      }
    }
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (c < 0x20 || c >= 0x7f) {
          const char esc[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xf]};
          out->append(esc, 6);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
    ++i;
  }
}

void FormatAccessLogLine(AccessLogFormat format, const RequestRecord& record,
                         std::chrono::system_clock::time_point now, Duration duration,
                         std::string* out) {
  if (format == AccessLogFormat::kOff) return;
  const auto since_epoch =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  const TimeTexts& times = TimesFor(static_cast<time_t>(since_epoch / 1000));
  char client_buf[INET6_ADDRSTRLEN];
  const absl::string_view client = ClientText(record.peer, client_buf);
  const Request* req = record.request;
  const absl::string_view protocol = ProtocolText(record);
  const RequestId* id = req != nullptr ? req->context().Get<RequestId>() : nullptr;
  if (format == AccessLogFormat::kCommon) {
    absl::StrAppend(out, client, " - - [", times.clf, "] \"");
    if (req != nullptr) {
      AppendClfEscaped(req->method().name(), out);
      out->push_back(' ');
      AppendClfEscaped(req->path(), out);
      if (!req->query().empty()) {
        out->push_back('?');
        AppendClfEscaped(req->query(), out);
      }
      absl::StrAppend(out, " ", protocol);
    } else {
      out->push_back('-');
    }
    absl::StrAppend(out, "\" ");
    if (record.status != 0) {
      absl::StrAppend(out, record.status);
    } else {
      out->push_back('-');
    }
    out->push_back(' ');
    if (record.body_bytes != 0) {
      absl::StrAppend(out, record.body_bytes);
    } else {
      out->push_back('-');
    }
    out->push_back(' ');
    AppendDuration(duration, out);
    if (id != nullptr) {  // the request-id middleware's
      out->push_back(' ');
      AppendClfEscaped(id->value(), out);
    }
    out->push_back('\n');
    return;
  }
  char millis[16];
  std::snprintf(millis, sizeof(millis), ".%03d", static_cast<int>(since_epoch % 1000));
  absl::StrAppend(out, "{\"time\":\"", times.iso, millis, "Z\",\"client\":\"", client, "\"");
  if (req != nullptr) {
    out->append(",\"method\":\"");
    AppendJsonEscaped(req->method().name(), out);
    out->append("\",\"path\":\"");
    AppendJsonEscaped(req->path(), out);
    out->push_back('"');
    if (!req->query().empty()) {
      out->append(",\"query\":\"");
      AppendJsonEscaped(req->query(), out);
      out->push_back('"');
    }
  }
  absl::StrAppend(out, ",\"protocol\":\"", protocol, "\",\"status\":", record.status,
                  ",\"bytes\":", record.body_bytes, ",\"duration\":");
  AppendDuration(duration, out);
  absl::StrAppend(out, ",\"completed\":", record.completed ? "true" : "false");
  if (id != nullptr) {
    out->append(",\"request_id\":\"");
    AppendJsonEscaped(id->value(), out);
    out->push_back('"');
  }
  out->append("}\n");
}

absl::StatusOr<std::unique_ptr<AccessLog>> AccessLog::Open(AccessLogFormat format,
                                                           const std::string& path) {
  if (path.empty()) {
    return std::unique_ptr<AccessLog>(new AccessLog(format, STDOUT_FILENO, false, ""));
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("access log ", path));
  }
  return std::unique_ptr<AccessLog>(new AccessLog(format, fd, true, path));
}

absl::Status AccessLog::Reopen() {
  if (!owns_fd_) return absl::OkStatus();
  const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("access log ", path_));
  std::lock_guard<std::mutex> lock(mu_);  // between whole lines
  const int rc = ::dup3(fd, fd_, O_CLOEXEC);
  const int saved = errno;
  ::close(fd);
  if (rc < 0) return absl::ErrnoToStatus(saved, absl::StrCat("access log ", path_));
  return absl::OkStatus();
}

AccessLog::~AccessLog() {
  if (owns_fd_) ::close(fd_);
}

void AccessLog::Write(const RequestRecord& record, Duration duration) {
  thread_local std::string line;
  line.clear();
  FormatAccessLogLine(format_, record, std::chrono::system_clock::now(), duration, &line);
  if (line.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // a full disk or a closed stdout costs the line, never the request
    }
    done += static_cast<size_t>(n);
  }
}

}  // namespace petrel::server
