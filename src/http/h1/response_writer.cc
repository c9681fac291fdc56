#include "http/h1/response_writer.h"

#include <charconv>
#include <cstdint>
#include <cstring>

#include "http/ascii.h"
#include "http/h1/chunked_decoder.h"
#include "http/h1/field_line.h"
#include "petrel/http/status.h"

namespace petrel::h1 {
namespace {

constexpr absl::string_view kCrlf = "\r\n";

// A cursor over reserved, already-sized space.
class Writer {
 public:
  explicit Writer(char* p) : p_(p) {}
  void Put(absl::string_view s) {
    std::memcpy(p_, s.data(), s.size());
    p_ += s.size();
  }
  void Field(absl::string_view name, absl::string_view value) {
    Put(name);
    Put(": ");
    Put(value);
    Put(kCrlf);
  }
  char* pos() const { return p_; }

 private:
  char* p_;
};

size_t FieldSize(const HeaderField& f) { return f.name.size() + 2 + f.value.size() + 2; }

bool IsValidField(const HeaderField& f) { return IsValidOutputField(f.name, f.value); }

// Response heads up to this many fields are read from the map once (HeaderMap::operator[] is a
// call); longer ones are read again while writing.
constexpr size_t kFieldsAtHand = 32;

// A HeaderField without default member initializers, so an array of them costs nothing until
// used.
struct FieldAtHand {
  const char* name;
  size_t name_size;
  const char* value;
  size_t value_size;

  void Set(const HeaderField& f) {
    name = f.name.data();
    name_size = f.name.size();
    value = f.value.data();
    value_size = f.value.size();
  }
  HeaderField Get() const {
    return {absl::string_view(name, name_size), absl::string_view(value, value_size)};
  }
};

// memcmp(a, b, n) == 0 for the short strings of a head, without a call: a word at a time, the
// last word overlapping the one before.
bool SameBytes(const char* a, const char* b, size_t n) {
  const auto load8 = [](const char* p) {
    uint64_t w;
    std::memcpy(&w, p, sizeof(w));
    return w;
  };
  const auto load4 = [](const char* p) {
    uint32_t w;
    std::memcpy(&w, p, sizeof(w));
    return w;
  };
  if (n >= 8) {
    for (size_t i = 0; n - i > 8; i += 8) {
      if (load8(a + i) != load8(b + i)) return false;
    }
    return load8(a + n - 8) == load8(b + n - 8);
  }
  if (n >= 4) return load4(a) == load4(b) && load4(a + n - 4) == load4(b + n - 4);
  for (size_t i = 0; i < n; ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

// Lower-case hex digits of n without leading zeros, right-aligned in buf; returns the digits.
absl::string_view Hex(uint64_t n, char (&buf)[16]) {
  static constexpr char kDigits[] = "0123456789abcdef";
  char* end = buf + sizeof(buf);
  char* p = end;
  do {
    *--p = kDigits[n & 0xf];
    n >>= 4;
  } while (n != 0);
  return absl::string_view(p, static_cast<size_t>(end - p));
}

// Decimal digits of n in buf; returns them.
absl::string_view Decimal(uint64_t n, char (&buf)[20]) {
  const std::to_chars_result r = std::to_chars(buf, buf + sizeof(buf), n);
  return absl::string_view(buf, static_cast<size_t>(r.ptr - buf));
}

// Both forms: `framing` null writes the fields as stored. With `head`, tells the bytes written
// before the Date line and whether the handler's fields had a Date (for HeadMemo).
absl::Status WriteHead(int status, const HeaderMap& headers, const HeadFraming* framing,
                       absl::string_view date, ByteBuffer& out, absl::string_view* head = nullptr,
                       bool* has_date_out = nullptr) {
  if (!IsValidStatusCode(status)) return absl::InvalidArgumentError("invalid status code");
  const absl::string_view reason = ReasonPhrase(status);
  size_t size = 9 + 3 + 1 + reason.size() + 2;  // "HTTP/1.1 " code SP reason CRLF
  bool has_date = false;
  const size_t count = headers.size();
  // Fields the engine drops, as a bit per field (header sections are short; longer ones are
  // checked again while writing).
  uint64_t skipped = 0;
  FieldAtHand at_hand[kFieldsAtHand];
  for (size_t i = 0; i < count; ++i) {
    const HeaderField f = headers[i];
    if (i < kFieldsAtHand) at_hand[i].Set(f);
    if (framing != nullptr && IsEngineResponseField(f.name)) {
      if (i < 64) skipped |= uint64_t{1} << i;
      continue;
    }
    if (!IsValidField(f)) return absl::InvalidArgumentError("invalid response field");
    if (f.name.size() == 4 && http_internal::EqualsIgnoreCase(f.name, "date")) has_date = true;
    size += FieldSize(f);
  }
  char length_buf[20];
  absl::string_view length;
  if (framing != nullptr) {
    if (framing->content_length.has_value()) {
      length = Decimal(*framing->content_length, length_buf);
      size += FieldSize({"Content-Length", length});
    }
    if (framing->chunked) size += FieldSize({"Transfer-Encoding", "chunked"});
    if (!framing->connection.empty()) size += FieldSize({"Connection", framing->connection});
    if (!framing->upgrade.empty()) size += FieldSize({"Upgrade", framing->upgrade});
  }
  const bool add_date = !date.empty() && !has_date;
  if (add_date) size += FieldSize({"Date", date});
  size += 2;

  char* start = out.WritableTail(size);
  Writer w(start);
  w.Put("HTTP/1.1 ");
  const char code[3] = {static_cast<char>('0' + status / 100),
                        static_cast<char>('0' + status / 10 % 10),
                        static_cast<char>('0' + status % 10)};
  w.Put(absl::string_view(code, 3));
  w.Put(" ");
  w.Put(reason);
  w.Put(kCrlf);
  for (size_t i = 0; i < count; ++i) {
    const HeaderField f = i < kFieldsAtHand ? at_hand[i].Get() : headers[i];
    if (framing != nullptr && (i < 64 ? (skipped >> i & 1) != 0 : IsEngineResponseField(f.name))) {
      continue;
    }
    w.Field(f.name, f.value);
  }
  if (framing != nullptr) {
    if (!length.empty()) w.Field("Content-Length", length);
    if (framing->chunked) w.Field("Transfer-Encoding", "chunked");
    if (!framing->connection.empty()) w.Field("Connection", framing->connection);
    if (!framing->upgrade.empty()) w.Field("Upgrade", framing->upgrade);
  }
  if (head != nullptr) {
    *head = absl::string_view(start, static_cast<size_t>(w.pos() - start));
    *has_date_out = has_date;
  }
  if (add_date) w.Field("Date", date);
  w.Put(kCrlf);
  out.CommitWrite(static_cast<size_t>(w.pos() - start));
  return absl::OkStatus();
}

}  // namespace

bool IsEngineResponseField(absl::string_view name) {
  switch (name.size()) {  // most names are rejected by their length alone
    case 2:
      return http_internal::EqualsIgnoreCase(name, "te");
    case 7:
      return http_internal::EqualsIgnoreCase(name, "upgrade") ||
             http_internal::EqualsIgnoreCase(name, "trailer");
    case 10:
      return http_internal::EqualsIgnoreCase(name, "connection") ||
             http_internal::EqualsIgnoreCase(name, "keep-alive");
    case 14:
      return http_internal::EqualsIgnoreCase(name, "content-length");
    case 16:
      return http_internal::EqualsIgnoreCase(name, "proxy-connection");
    case 17:
      return http_internal::EqualsIgnoreCase(name, "transfer-encoding");
    default:
      return false;
  }
}

absl::Status WriteResponseHead(int status, const HeaderMap& headers, absl::string_view date,
                               ByteBuffer& out) {
  return WriteHead(status, headers, nullptr, date, out);
}

absl::Status WriteResponseHead(int status, const HeaderMap& headers, const HeadFraming& framing,
                               absl::string_view date, ByteBuffer& out, HeadMemo* memo) {
  if (memo == nullptr) return WriteHead(status, headers, &framing, date, out);
  const int differing = memo->Compare(status, headers, framing);
  // The same inputs as the remembered head: the same bytes, checked when it was written.
  if (differing == HeadMemo::kSame) {
    const bool add_date = !date.empty() && !memo->has_date_;
    const size_t size = memo->head_.size() + (add_date ? FieldSize({"Date", date}) : 0) + 2;
    char* start = out.WritableTail(size);
    Writer w(start);
    w.Put(memo->head_);
    if (add_date) w.Field("Date", date);
    w.Put(kCrlf);
    out.CommitWrite(size);
    return absl::OkStatus();
  }
  if (differing >= 0) {
    // All but one field's value: that value is checked now and written in the remembered one's
    // place. A handler's engine-owned field is dropped, so a difference there changes nothing.
    const size_t i = static_cast<size_t>(differing);
    const HeaderField f = headers[i];
    const uint32_t value_at = memo->value_at_[i];
    if (value_at == HeadMemo::kNotWritten || IsValidField(f)) {
      memo->WriteWithValue(value_at, memo->sizes_[2 * i + 1], f.value, date, out);
      return absl::OkStatus();
    }
  }
  absl::string_view head;
  bool has_date = false;
  absl::Status status_written = WriteHead(status, headers, &framing, date, out, &head, &has_date);
  if (status_written.ok()) {
    memo->Remember(status, headers, framing, head, has_date);
  } else {
    memo->valid_ = false;
  }
  return status_written;
}

void HeadMemo::WriteWithValue(uint32_t value_at, size_t old_size, absl::string_view value,
                              absl::string_view date, ByteBuffer& out) const {
  const absl::string_view head = head_;
  const bool replace = value_at != kNotWritten;
  const bool add_date = !date.empty() && !has_date_;
  const size_t size = head.size() + (replace ? value.size() - old_size : 0) +
                      (add_date ? FieldSize({"Date", date}) : 0) + 2;
  char* start = out.WritableTail(size);
  Writer w(start);
  if (replace) {
    w.Put(head.substr(0, value_at));
    w.Put(value);
    w.Put(head.substr(value_at + old_size));
  } else {
    w.Put(head);
  }
  if (add_date) w.Field("Date", date);
  w.Put(kCrlf);
  out.CommitWrite(size);
}

int HeadMemo::Compare(int status, const HeaderMap& headers, const HeadFraming& framing) const {
  const size_t count = headers.size();
  // A 101 happens once per connection: never worth remembering.
  if (!valid_ || !framing.upgrade.empty() || status != status_ || count * 2 != sizes_.size() ||
      framing.content_length != content_length_ || framing.chunked != chunked_ ||
      framing.connection != connection_) {
    return kNoMatch;
  }
  // The sizes first, and whether the map holds the fields back to back (HeaderMap keeps each
  // value right after its name, and a map that was only added to keeps the fields in order):
  // then one comparison covers them all.
  if (count == 0) return kSame;
  const char* const begin = headers[0].name.data();
  const char* expected = begin;
  bool contiguous = true;
  int differing = kSame;
  for (size_t i = 0; i < count; ++i) {
    const HeaderField f = headers[i];
    if (f.name.size() != sizes_[2 * i]) return kNoMatch;
    if (f.value.size() != sizes_[2 * i + 1]) {
      if (differing != kSame) return kNoMatch;
      differing = static_cast<int>(i);
    }
    contiguous &= f.name.data() == expected && f.value.data() == expected + f.name.size();
    expected = f.value.data() + f.value.size();
  }
  if (differing == kSame && contiguous && SameBytes(fields_.data(), begin, fields_.size())) {
    return kSame;
  }
  const char* p = fields_.data();
  for (size_t i = 0; i < count; ++i) {
    const HeaderField f = headers[i];
    const size_t name_size = sizes_[2 * i];
    const size_t value_size = sizes_[2 * i + 1];
    if (!SameBytes(p, f.name.data(), name_size)) return kNoMatch;
    if (static_cast<int>(i) != differing && !SameBytes(p + name_size, f.value.data(), value_size)) {
      if (differing != kSame) return kNoMatch;
      differing = static_cast<int>(i);
    }
    p += name_size + value_size;
  }
  return differing;
}

void HeadMemo::Remember(int status, const HeaderMap& headers, const HeadFraming& framing,
                        absl::string_view head, bool has_date) {
  valid_ = true;
  status_ = status;
  content_length_ = framing.content_length;
  chunked_ = framing.chunked;
  connection_.assign(framing.connection.data(), framing.connection.size());
  has_date_ = has_date;
  const size_t count = headers.size();
  sizes_.resize(count * 2);
  size_t bytes = 0;
  for (size_t i = 0; i < count; ++i) {
    const HeaderField f = headers[i];
    sizes_[2 * i] = static_cast<uint32_t>(f.name.size());
    sizes_[2 * i + 1] = static_cast<uint32_t>(f.value.size());
    bytes += f.name.size() + f.value.size();
  }
  fields_.resize(bytes);
  char* p = fields_.data();
  for (const HeaderField f : headers) {
    std::memcpy(p, f.name.data(), f.name.size());
    std::memcpy(p + f.name.size(), f.value.data(), f.value.size());
    p += f.name.size() + f.value.size();
  }
  head_.assign(head.data(), head.size());
  // Where each written field's value lies in the head: after the status line, fields in order,
  // "name: value\r\n" each, the engine's own dropped (as WriteHead does).
  value_at_.resize(count);
  size_t at = absl::string_view(head_).find(kCrlf) + kCrlf.size();
  for (size_t i = 0; i < count; ++i) {
    const HeaderField f = headers[i];
    if (IsEngineResponseField(f.name)) {
      value_at_[i] = kNotWritten;
      continue;
    }
    value_at_[i] = static_cast<uint32_t>(at + f.name.size() + 2);
    at += FieldSize(f);
  }
}

void WriteContinue(ByteBuffer& out) { out.Append("HTTP/1.1 100 Continue\r\n\r\n"); }

void WriteChunk(absl::string_view data, ByteBuffer& out) {
  if (data.empty()) return;
  char buf[16];
  const absl::string_view size_hex = Hex(data.size(), buf);
  const size_t size = size_hex.size() + 2 + data.size() + 2;
  char* start = out.WritableTail(size);
  Writer w(start);
  w.Put(size_hex);
  w.Put(kCrlf);
  w.Put(data);
  w.Put(kCrlf);
  out.CommitWrite(size);
}

absl::Status WriteLastChunk(const HeaderMap* trailers, ByteBuffer& out) {
  size_t size = 3 + 2;  // "0\r\n" ... "\r\n"
  if (trailers) {
    for (const HeaderField f : *trailers) {
      if (!IsValidField(f)) return absl::InvalidArgumentError("invalid trailer field");
      if (!IsForbiddenTrailer(f.name)) size += FieldSize(f);
    }
  }
  char* start = out.WritableTail(size);
  Writer w(start);
  w.Put("0\r\n");
  if (trailers) {
    for (const HeaderField f : *trailers) {
      if (!IsForbiddenTrailer(f.name)) w.Field(f.name, f.value);
    }
  }
  w.Put(kCrlf);
  out.CommitWrite(size);
  return absl::OkStatus();
}

}  // namespace petrel::h1
