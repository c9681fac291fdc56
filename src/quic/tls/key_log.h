// Internal: TLS secrets in the NSS key log format (SSLKEYLOGFILE), so that Wireshark and tshark
// can decrypt Petrel's traffic. Debugging only: whoever reads the file reads the traffic.
#ifndef PETREL_QUIC_TLS_KEY_LOG_H_
#define PETREL_QUIC_TLS_KEY_LOG_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace petrel::quic {

class KeyLogFile {
 public:
  // Opens `path` for appending (created with mode 0600).
  static absl::StatusOr<std::unique_ptr<KeyLogFile>> Open(const std::string& path);
  // The path in SSLKEYLOGFILE, or empty.
  static std::string PathFromEnvironment();
  ~KeyLogFile();
  KeyLogFile(const KeyLogFile&) = delete;
  KeyLogFile& operator=(const KeyLogFile&) = delete;

  // Appends `line` and a newline in one write(2), so lines from many threads never interleave.
  // Safe from any thread.
  void Write(absl::string_view line);

 private:
  explicit KeyLogFile(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace petrel::quic

#endif  // PETREL_QUIC_TLS_KEY_LOG_H_
