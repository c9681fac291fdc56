// Internal: serialization of HTTP/1.1 response heads and chunked bodies into a ByteBuffer.
#ifndef PETREL_HTTP_H1_RESPONSE_WRITER_H_
#define PETREL_HTTP_H1_RESPONSE_WRITER_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "petrel/common/byte_buffer.h"
#include "petrel/http/header_map.h"

namespace petrel::h1 {

// Every function computes the exact size first and writes with one WritableTail/CommitWrite, so
// it allocates nothing beyond the buffer's own growth (none when the buffer has room). On error
// nothing is written.

// "HTTP/1.1 <code> <reason>\r\n", the fields as stored, "Date: <date>\r\n" when `date` is not
// empty and `headers` has no Date of its own, then the empty line. The status line always says
// HTTP/1.1, also to 1.0 clients (RFC 9110 §2.5); the engine picks framing the peer understands.
// The writer does not add framing or Connection fields: that is the engine's decision.
// InvalidArgument if `status` is not 100..599 or a field name is not a token or a value is not
// valid (IsValidFieldValue) — a CR or LF from a handler must never split the response.
absl::Status WriteResponseHead(int status, const HeaderMap& headers, absl::string_view date,
                               ByteBuffer& out);

// "HTTP/1.1 100 Continue\r\n\r\n" (RFC 9110 §15.2.1).
void WriteContinue(ByteBuffer& out);

// One chunk: "<hex size>\r\n<data>\r\n". Empty `data` writes nothing, since an empty chunk would
// be read as the last one.
void WriteChunk(absl::string_view data, ByteBuffer& out);

// The last chunk "0\r\n", the trailer fields (if `trailers` is not null), then "\r\n". Fields
// that are forbidden in trailers (IsForbiddenTrailer) are skipped. InvalidArgument on an invalid
// name or value (nothing written).
absl::Status WriteLastChunk(const HeaderMap* trailers, ByteBuffer& out);

}  // namespace petrel::h1

#endif  // PETREL_HTTP_H1_RESPONSE_WRITER_H_
