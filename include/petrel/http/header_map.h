// Public: an ordered, case-insensitive, multi-value map of HTTP fields (headers or trailers).
#ifndef PETREL_HTTP_HEADER_MAP_H_
#define PETREL_HTTP_HEADER_MAP_H_

#include <cstddef>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/string_view.h"

namespace petrel {

// One field as stored: `name` keeps the spelling it was added with.
struct HeaderField {
  absl::string_view name;
  absl::string_view value;
};

// Fields in insertion order; names compare ASCII case-insensitively; a name may repeat.
//
// Storage: all names and values live back to back in one byte arena (a std::string) and the
// entries are offsets into it, so a request's whole header section costs two allocations
// (amortized, usually none after Reserve) instead of two per field. Removed or replaced bytes stay
// in the arena as garbage until they outweigh the live bytes, then the arena is compacted.
// Lookups are linear scans (header sections are small), comparing lengths before bytes.
//
// The map does not validate: engines check received fields with IsValidFieldName/Value before
// adding them, and check handler-supplied fields before sending them. h2/h3 engines lowercase
// names on output; the h1 engine writes them as stored.
//
// Views returned by Get, GetAll, operator[] and iteration stay valid until the next non-const
// call. Arguments may alias the map's own storage (e.g. `m.Add("b", *m.Get("a"))`).
// Not thread-safe; a map belongs to one request on one loop thread.
class HeaderMap {
 public:
  class const_iterator;

  HeaderMap() = default;
  HeaderMap(std::initializer_list<HeaderField> fields);
  HeaderMap(const HeaderMap& other);
  HeaderMap& operator=(const HeaderMap& other);
  HeaderMap(HeaderMap&& other) noexcept;
  HeaderMap& operator=(HeaderMap&& other) noexcept;
  ~HeaderMap() = default;

  // Appends a field, keeping any others of the same name.
  void Add(absl::string_view name, absl::string_view value) {
    entries_.push_back(Append(name, value));
  }
  // Appends every field of `other` in its order, as that many Add calls would (`other` may be
  // this map). Copies the bytes in one piece: meant for a field set prepared once and added to
  // many responses.
  void AddAll(const HeaderMap& other);
  // Replaces all fields named `name` with one field: it takes the position of the first existing
  // one (and the new spelling of the name), or is appended if there was none.
  void Set(absl::string_view name, absl::string_view value);
  // Removes every field named `name`; returns how many there were.
  size_t Remove(absl::string_view name);
  void Clear();
  // Capacity for `fields` entries and `bytes` bytes of names plus values.
  void Reserve(size_t fields, size_t bytes = 0);
  // Lowercases every name in place (ASCII), e.g. for h2/h3 output, which needs lowercase names:
  // lookups are case-insensitive anyway, and views into the map stay valid. Nothing to do when
  // names_lowercase().
  void LowercaseNames();
  // True when no name has an uppercase ASCII letter, so h2/h3 can send the names as they are.
  bool names_lowercase() const { return names_lowercase_; }

  // The first value of `name`.
  std::optional<absl::string_view> Get(absl::string_view name) const;
  // All values of `name`, in order.
  absl::InlinedVector<absl::string_view, 4> GetAll(absl::string_view name) const;
  // All values joined with ", " (RFC 9110 §5.3 list semantics); nullopt if absent. Not for
  // Set-Cookie, whose values cannot be combined.
  std::optional<std::string> GetJoined(absl::string_view name) const;
  bool Contains(absl::string_view name) const;

  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  // The i-th field in insertion order; i < size().
  HeaderField operator[](size_t i) const {
    const Entry& e = entries_[i];
    return HeaderField{NameOf(e), ValueOf(e)};
  }

  const_iterator begin() const;
  const_iterator end() const;

  // Bytes of names and values currently stored (live ones only).
  size_t byte_size() const { return bytes_size_ - dead_bytes_; }
  // Bytes held in the arena, garbage included (for tests and memory accounting).
  size_t arena_size() const { return bytes_size_; }

 private:
  struct Entry {
    size_t offset;  // Name starts here in bytes_; the value follows it directly.
    size_t name_size;
    size_t value_size;
  };

  absl::string_view NameOf(const Entry& e) const {
    return absl::string_view(bytes_.get() + e.offset, e.name_size);
  }
  absl::string_view ValueOf(const Entry& e) const {
    return absl::string_view(bytes_.get() + e.offset + e.name_size, e.value_size);
  }
  Entry Append(absl::string_view name, absl::string_view value);
  // Grows the arena so `need` more bytes fit; returns the old arena, which the caller keeps
  // alive while arguments may still point into it (nullptr when no growth was needed).
  std::unique_ptr<char[]> MakeRoom(size_t need);
  void MaybeCompact();

  // The arena: names and values back to back, bytes_size_ of bytes_capacity_ used. A plain
  // buffer rather than a std::string: appending a field is two memcpy calls, and growing it
  // never zero-fills.
  std::unique_ptr<char[]> bytes_;
  size_t bytes_size_ = 0;
  size_t bytes_capacity_ = 0;
  std::vector<Entry> entries_;
  size_t dead_bytes_ = 0;  // Bytes in bytes_ that no entry refers to.
  // No name (live or dead) has an uppercase letter: kept by Append and AddAll, so that a field
  // set prepared in lowercase reaches h2/h3 output with no pass over its names.
  bool names_lowercase_ = true;
};

// Iterates fields in insertion order; yields HeaderField by value.
class HeaderMap::const_iterator {
 public:
  using iterator_category = std::forward_iterator_tag;
  using value_type = HeaderField;
  using difference_type = std::ptrdiff_t;
  using pointer = void;
  using reference = HeaderField;

  const_iterator() = default;
  HeaderField operator*() const { return (*map_)[index_]; }
  const_iterator& operator++() {
    ++index_;
    return *this;
  }
  const_iterator operator++(int) {
    const_iterator old = *this;
    ++index_;
    return old;
  }
  friend bool operator==(const const_iterator& a, const const_iterator& b) {
    return a.index_ == b.index_;
  }

 private:
  friend class HeaderMap;
  const_iterator(const HeaderMap* map, size_t index) : map_(map), index_(index) {}

  const HeaderMap* map_ = nullptr;
  size_t index_ = 0;
};

inline HeaderMap::const_iterator HeaderMap::begin() const { return const_iterator(this, 0); }
inline HeaderMap::const_iterator HeaderMap::end() const {
  return const_iterator(this, entries_.size());
}

// A field name is a token (RFC 9110 §5.1). Pseudo-headers (":path") are not field names; the
// h2/h3 engines handle them before building a HeaderMap.
bool IsValidFieldName(absl::string_view name);

// A field value as Petrel accepts it (RFC 9110 §5.5, DESIGN §7): no control characters other
// than HTAB — so no CR, LF, NUL or DEL — and no leading or trailing SP/HTAB (callers trim first
// with TrimFieldValue). Empty is valid; bytes >= 0x80 (obs-text) are allowed.
bool IsValidFieldValue(absl::string_view value);

// `value` without leading and trailing SP/HTAB.
absl::string_view TrimFieldValue(absl::string_view value);

}  // namespace petrel

#endif  // PETREL_HTTP_HEADER_MAP_H_
