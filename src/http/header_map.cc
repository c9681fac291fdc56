#include "petrel/http/header_map.h"

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "http/ascii.h"

namespace petrel {
namespace {

using http_internal::EqualsIgnoreCase;

// Compaction only pays off once the garbage is both large and the majority of the arena.
constexpr size_t kMinDeadBytesToCompact = 512;
// First arena: room for a typical small message's fields without growing.
constexpr size_t kMinArenaBytes = 256;

}  // namespace

HeaderMap::HeaderMap(std::initializer_list<HeaderField> fields) {
  size_t bytes = 0;
  for (const HeaderField& f : fields) bytes += f.name.size() + f.value.size();
  Reserve(fields.size(), bytes);
  for (const HeaderField& f : fields) Add(f.name, f.value);
}

HeaderMap::HeaderMap(const HeaderMap& other)
    : bytes_size_(other.bytes_size_ - other.dead_bytes_),
      bytes_capacity_(bytes_size_),
      entries_(other.entries_),
      names_lowercase_(other.names_lowercase_) {
  // The copy holds live bytes only.
  if (bytes_capacity_ != 0) bytes_.reset(new char[bytes_capacity_]);
  size_t offset = 0;
  for (Entry& e : entries_) {
    const size_t n = e.name_size + e.value_size;
    if (n != 0) std::memcpy(bytes_.get() + offset, other.bytes_.get() + e.offset, n);
    e.offset = offset;
    offset += n;
  }
}

HeaderMap& HeaderMap::operator=(const HeaderMap& other) {
  if (this != &other) *this = HeaderMap(other);
  return *this;
}

HeaderMap::HeaderMap(HeaderMap&& other) noexcept
    : bytes_(std::move(other.bytes_)),
      bytes_size_(std::exchange(other.bytes_size_, 0)),
      bytes_capacity_(std::exchange(other.bytes_capacity_, 0)),
      entries_(std::move(other.entries_)),
      dead_bytes_(std::exchange(other.dead_bytes_, 0)),
      names_lowercase_(std::exchange(other.names_lowercase_, true)) {
  other.entries_.clear();
}

HeaderMap& HeaderMap::operator=(HeaderMap&& other) noexcept {
  if (this != &other) {
    bytes_ = std::move(other.bytes_);
    bytes_size_ = std::exchange(other.bytes_size_, 0);
    bytes_capacity_ = std::exchange(other.bytes_capacity_, 0);
    entries_ = std::move(other.entries_);
    other.entries_.clear();
    dead_bytes_ = std::exchange(other.dead_bytes_, 0);
    names_lowercase_ = std::exchange(other.names_lowercase_, true);
  }
  return *this;
}

std::unique_ptr<char[]> HeaderMap::MakeRoom(size_t need) {
  if (bytes_capacity_ - bytes_size_ >= need) return nullptr;
  const size_t capacity = std::max({bytes_capacity_ * 2, bytes_size_ + need, kMinArenaBytes});
  std::unique_ptr<char[]> grown(new char[capacity]);
  if (bytes_size_ != 0) std::memcpy(grown.get(), bytes_.get(), bytes_size_);
  bytes_capacity_ = capacity;
  return std::exchange(bytes_, std::move(grown));
}

HeaderMap::Entry HeaderMap::Append(absl::string_view name, absl::string_view value) {
  const size_t need = name.size() + value.size();
  const Entry entry{bytes_size_, name.size(), value.size()};
  if (names_lowercase_ && http_internal::HasUpperAscii(name.data(), name.size())) {
    names_lowercase_ = false;
  }
  // `name` or `value` may point into the arena: a grown arena keeps the old one alive until
  // they are copied.
  const std::unique_ptr<char[]> old = MakeRoom(need);
  char* out = bytes_.get() + bytes_size_;
  if (!name.empty()) std::memcpy(out, name.data(), name.size());
  if (!value.empty()) std::memcpy(out + name.size(), value.data(), value.size());
  bytes_size_ += need;
  return entry;
}

void HeaderMap::AddAll(const HeaderMap& other) {
  if (&other == this || other.dead_bytes_ != 0) {
    // Garbage between the fields (or bytes that move as they are added): field by field.
    const size_t count = other.entries_.size();
    for (size_t i = 0; i < count; ++i) {
      Add(other.NameOf(other.entries_[i]), other.ValueOf(other.entries_[i]));
    }
    return;
  }
  names_lowercase_ = names_lowercase_ && other.names_lowercase_;
  const size_t need = other.bytes_size_;
  MakeRoom(need);
  if (need != 0) std::memcpy(bytes_.get() + bytes_size_, other.bytes_.get(), need);
  const size_t base = bytes_size_;
  bytes_size_ += need;
  if (base == 0 && entries_.empty()) {  // usual (prepared fields first): offsets as they are
    entries_.assign(other.entries_.begin(), other.entries_.end());
    return;
  }
  entries_.reserve(entries_.size() + other.entries_.size());
  for (const Entry& e : other.entries_) {
    entries_.push_back(Entry{base + e.offset, e.name_size, e.value_size});
  }
}

void HeaderMap::Set(absl::string_view name, absl::string_view value) {
  auto first = std::find_if(entries_.begin(), entries_.end(),
                            [&](const Entry& e) { return EqualsIgnoreCase(NameOf(e), name); });
  if (first == entries_.end()) {
    Add(name, value);
    return;
  }
  const size_t index = static_cast<size_t>(first - entries_.begin());
  // Append before dropping the old bytes: `name`/`value` may alias them.
  const Entry replacement = Append(name, value);
  dead_bytes_ += entries_[index].name_size + entries_[index].value_size;
  entries_[index] = replacement;
  auto rest = std::remove_if(entries_.begin() + static_cast<std::ptrdiff_t>(index) + 1,
                             entries_.end(), [&](const Entry& e) {
                               if (!EqualsIgnoreCase(NameOf(e), name)) return false;
                               dead_bytes_ += e.name_size + e.value_size;
                               return true;
                             });
  entries_.erase(rest, entries_.end());
  MaybeCompact();
}

size_t HeaderMap::Remove(absl::string_view name) {
  const size_t before = entries_.size();
  auto rest = std::remove_if(entries_.begin(), entries_.end(), [&](const Entry& e) {
    if (!EqualsIgnoreCase(NameOf(e), name)) return false;
    dead_bytes_ += e.name_size + e.value_size;
    return true;
  });
  entries_.erase(rest, entries_.end());
  const size_t removed = before - entries_.size();
  if (removed != 0) MaybeCompact();
  return removed;
}

void HeaderMap::Clear() {
  entries_.clear();
  bytes_size_ = 0;  // the arena's capacity stays for the next message
  dead_bytes_ = 0;
  names_lowercase_ = true;
}

void HeaderMap::LowercaseNames() {
  if (names_lowercase_) return;
  names_lowercase_ = true;
  char* bytes = bytes_.get();
  for (const Entry& e : entries_) {
    http_internal::CopyLowercase(bytes + e.offset, bytes + e.offset, e.name_size);
  }
}

void HeaderMap::Reserve(size_t fields, size_t bytes) {
  entries_.reserve(fields);
  if (bytes <= bytes_capacity_) return;
  std::unique_ptr<char[]> grown(new char[bytes]);
  if (bytes_size_ != 0) std::memcpy(grown.get(), bytes_.get(), bytes_size_);
  bytes_ = std::move(grown);
  bytes_capacity_ = bytes;
}

void HeaderMap::MaybeCompact() {
  if (entries_.empty()) {
    bytes_size_ = 0;
    dead_bytes_ = 0;
    return;
  }
  if (dead_bytes_ < kMinDeadBytesToCompact || dead_bytes_ * 2 < bytes_size_) return;
  const size_t live = bytes_size_ - dead_bytes_;
  std::unique_ptr<char[]> compacted(new char[live]);
  size_t offset = 0;
  for (Entry& e : entries_) {
    const size_t n = e.name_size + e.value_size;
    if (n != 0) std::memcpy(compacted.get() + offset, bytes_.get() + e.offset, n);
    e.offset = offset;
    offset += n;
  }
  bytes_ = std::move(compacted);
  bytes_size_ = bytes_capacity_ = live;
  dead_bytes_ = 0;
}

std::optional<absl::string_view> HeaderMap::Get(absl::string_view name) const {
  for (const Entry& e : entries_) {
    if (EqualsIgnoreCase(NameOf(e), name)) return ValueOf(e);
  }
  return std::nullopt;
}

absl::InlinedVector<absl::string_view, 4> HeaderMap::GetAll(absl::string_view name) const {
  absl::InlinedVector<absl::string_view, 4> values;
  for (const Entry& e : entries_) {
    if (EqualsIgnoreCase(NameOf(e), name)) values.push_back(ValueOf(e));
  }
  return values;
}

std::optional<std::string> HeaderMap::GetJoined(absl::string_view name) const {
  std::optional<std::string> joined;
  for (const Entry& e : entries_) {
    if (!EqualsIgnoreCase(NameOf(e), name)) continue;
    if (!joined.has_value()) {
      joined.emplace(ValueOf(e));
    } else {
      const absl::string_view value = ValueOf(e);
      joined->append(", ");
      joined->append(value.data(), value.size());
    }
  }
  return joined;
}

bool HeaderMap::Contains(absl::string_view name) const { return Get(name).has_value(); }

bool IsValidFieldName(absl::string_view name) { return http_internal::IsToken(name); }

namespace {

bool IsFieldValueByte(unsigned char c) { return (c >= 0x20 || c == '\t') && c != 0x7f; }

// True if some byte of `word` is below 0x20 or is 0x7f (DEL): eight bytes per test, since every
// response field a handler sets and every request field h1 receives passes through here.
bool MayHoldControlByte(uint64_t word) {
  constexpr uint64_t kOnes = 0x0101010101010101u;
  constexpr uint64_t kHigh = 0x8080808080808080u;
  const uint64_t below_space = (word - 0x20 * kOnes) & ~word & kHigh;
  const uint64_t del = word ^ (0x7f * kOnes);
  const uint64_t is_del = (del - kOnes) & ~del & kHigh;
  return (below_space | is_del) != 0;
}

}  // namespace

bool IsValidFieldValue(absl::string_view value) {
  if (value.empty()) return true;
  if (http_internal::IsOws(value.front()) || http_internal::IsOws(value.back())) return false;
  const char* p = value.data();
  const char* const end = p + value.size();
  for (; end - p >= 8; p += 8) {
    uint64_t word;
    std::memcpy(&word, p, sizeof(word));
    if (!MayHoldControlByte(word)) continue;
    // A tab, a real control byte, or a false alarm from the borrow of one: look byte by byte.
    for (int i = 0; i < 8; ++i) {
      if (!IsFieldValueByte(static_cast<unsigned char>(p[i]))) return false;
    }
  }
  for (; p < end; ++p) {
    if (!IsFieldValueByte(static_cast<unsigned char>(*p))) return false;
  }
  return true;
}

absl::string_view TrimFieldValue(absl::string_view value) {
  while (!value.empty() && http_internal::IsOws(value.front())) value.remove_prefix(1);
  while (!value.empty() && http_internal::IsOws(value.back())) value.remove_suffix(1);
  return value;
}

}  // namespace petrel
