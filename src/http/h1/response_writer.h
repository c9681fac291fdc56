// Internal: serialization of HTTP/1.1 response heads and chunked bodies into a ByteBuffer.
#ifndef PETREL_HTTP_H1_RESPONSE_WRITER_H_
#define PETREL_HTTP_H1_RESPONSE_WRITER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

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

// What the engine adds to a handler's fields: framing and connection management.
struct HeadFraming {
  std::optional<uint64_t> content_length;  // "Content-Length: <n>"
  bool chunked = false;                    // "Transfer-Encoding: chunked"
  absl::string_view connection;            // "Connection: <value>" when not empty
  absl::string_view upgrade;               // "Upgrade: <value>" when not empty (a 101)
};

// The last head the engine's form of WriteResponseHead wrote with it: the status, the handler's
// fields and the framing it was made from, and its bytes up to the Date line. A head made from
// the same inputs again (a client fetching one resource repeatedly on its connection: polling,
// static files, load tests) is then copied instead of checked and assembled field by field; its
// Date line is written fresh. So is a head whose only difference is one field's value (a
// request id, a per-response token): that value is checked and put in the remembered bytes'
// place. One per connection; it grows to the largest head it held, and a head that differs
// more costs a comparison up to the second difference, then a copy of its inputs.
class HeadMemo {
 public:
  static constexpr int kSame = -1;  // Compare: the remembered inputs exactly
  // Compare: another status, framing, field count or name, or more than one value differs.
  static constexpr int kNoMatch = -2;
  // kSame, kNoMatch, or the index of the one field whose value alone differs from the inputs of
  // the last successful write (the same names, in the same order; the same status and framing).
  int Compare(int status, const HeaderMap& headers, const HeadFraming& framing) const;

 private:
  friend absl::Status WriteResponseHead(int status, const HeaderMap& headers,
                                        const HeadFraming& framing, absl::string_view date,
                                        ByteBuffer& out, HeadMemo* memo);
  void Remember(int status, const HeaderMap& headers, const HeadFraming& framing,
                absl::string_view head, bool has_date);
  // The remembered head into `out`, its value at `value_at` (of `old_size` bytes) replaced by
  // `value` unless value_at is kNotWritten, then the Date line (when due) and the empty line.
  void WriteWithValue(uint32_t value_at, size_t old_size, absl::string_view value,
                      absl::string_view date, ByteBuffer& out) const;

  bool valid_ = false;
  int status_ = 0;
  std::optional<uint64_t> content_length_;
  bool chunked_ = false;
  std::string connection_;
  bool has_date_ = false;        // the handler's fields include a Date
  std::vector<uint32_t> sizes_;  // name size, value size, per field
  // Per field, where its value starts in head_ (kNotWritten: an engine-owned field, dropped).
  static constexpr uint32_t kNotWritten = UINT32_MAX;
  std::vector<uint32_t> value_at_;
  std::string fields_;  // names and values back to back
  std::string head_;    // status line and fields, without Date and the end
};

// The engine's form of WriteResponseHead: the handler's `headers` except the fields the engine
// owns (IsEngineResponseField: framing, connection management — a handler's are dropped), then
// the `framing` fields, then Date as above. Writes straight from the handler's map, so a
// response head costs no allocation beyond the buffer's growth (and, with a `memo`, beyond the
// memo's growth to the largest head it held).
absl::Status WriteResponseHead(int status, const HeaderMap& headers, const HeadFraming& framing,
                               absl::string_view date, ByteBuffer& out, HeadMemo* memo = nullptr);

// Response fields the engine owns (RFC 9110 §7.6.1, RFC 9112 §6): Connection, Keep-Alive,
// Proxy-Connection, Transfer-Encoding, Content-Length, Upgrade, TE, Trailer.
bool IsEngineResponseField(absl::string_view name);

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
