// Internal (tools): petrel-client's --session-file, holding what a resumption needs — the TLS
// session ticket and the server's transport parameters — in one small file.
//
// Format (both blobs are opaque bytes, stored raw):
//   petrel-session 1\n
//   session <decimal length>\n<that many bytes>\n
//   transport-params <decimal length>\n<that many bytes>\n
// and nothing after. Anything else is not a session file.
#ifndef PETREL_TOOLS_SESSION_FILE_H_
#define PETREL_TOOLS_SESSION_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace petrel::tools {

struct SavedSession {
  std::string session;
  std::string transport_params;
};

std::string EncodeSession(const SavedSession& saved);
// InvalidArgument when `bytes` is not in the format above or a blob is empty.
absl::StatusOr<SavedSession> DecodeSession(absl::string_view bytes);

// NotFound when `path` does not exist; InvalidArgument when it is not a session file.
absl::StatusOr<SavedSession> LoadSessionFile(const std::string& path);
// Writes `path` atomically: a temporary file beside it, then rename(), so a reader (or a
// concurrent run) sees the old file or the new one, never a torn one.
absl::Status SaveSessionFile(const std::string& path, const SavedSession& saved);

}  // namespace petrel::tools

#endif  // PETREL_TOOLS_SESSION_FILE_H_
