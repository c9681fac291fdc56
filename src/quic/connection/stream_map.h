// Internal: the streams of one connection by QUIC stream id, owned, for the per-request lookups
// of the transport (Connection) and of the HTTP/3 engine (H3Connection).
//
// Request streams are client-initiated bidirectional streams: ids 0, 4, 8, ..., opened in order
// and, under MAX_STREAMS, at most a window of them open at once. Those live in a ring indexed by
// id / 4, where finding, adding and removing one is an index and a compare — no hash, no probe.
// Everything else (unidirectional and server-initiated streams, and a request stream whose slot is
// still held by an older one that outlived a whole ring of successors) goes to a hash map, which
// is looked at only when it holds something.
#ifndef PETREL_QUIC_CONNECTION_STREAM_MAP_H_
#define PETREL_QUIC_CONNECTION_STREAM_MAP_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace petrel::quic {

template <typename Stream>
class StreamMap {
 public:
  StreamMap() = default;
  StreamMap(const StreamMap&) = delete;
  StreamMap& operator=(const StreamMap&) = delete;

  // The stream with this id, or nullptr.
  Stream* Find(int64_t id) const {
    if (InRing(id)) {
      if (ring_ != nullptr) {
        const Slot& slot = ring_[RingIndex(id)];
        if (slot.stream != nullptr && slot.id == id) return slot.stream.get();
      }
      // The map holds the control and QPACK streams all along: asked only if a request stream
      // had to go there.
      if (ring_spilled_ == 0) return nullptr;
    }
    if (others_.empty()) return nullptr;
    auto it = others_.find(id);
    return it == others_.end() ? nullptr : it->second.get();
  }

  // Adds `stream` (not null) under `id`, which must not be present; returns it.
  Stream* Add(int64_t id, std::unique_ptr<Stream> stream) {
    Stream* const added = stream.get();
    ++size_;
    if (InRing(id)) {
      if (ring_ == nullptr) ring_ = std::make_unique<Slot[]>(kRingSize);
      Slot& slot = ring_[RingIndex(id)];
      if (slot.stream == nullptr) {
        slot.id = id;
        slot.stream = std::move(stream);
        return added;
      }
    }
    if (InRing(id)) ++ring_spilled_;
    others_.emplace(id, std::move(stream));
    return added;
  }

  // Removes the stream with this id and hands it over; nullptr if there was none.
  std::unique_ptr<Stream> Take(int64_t id) {
    std::unique_ptr<Stream> taken;
    if (InRing(id) && ring_ != nullptr) {
      Slot& slot = ring_[RingIndex(id)];
      if (slot.stream != nullptr && slot.id == id) taken = std::move(slot.stream);
    }
    if (taken == nullptr && !others_.empty() && (!InRing(id) || ring_spilled_ != 0)) {
      auto it = others_.find(id);
      if (it != others_.end()) {
        taken = std::move(it->second);
        others_.erase(it);
        if (InRing(id)) --ring_spilled_;
      }
    }
    if (taken != nullptr) --size_;
    return taken;
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // Calls f(id, Stream&) for every stream, in no particular order. `f` must not add or remove
  // streams (collect Ids() first for that).
  template <typename F>
  void ForEach(F&& f) const {
    if (ring_ != nullptr && size_ != others_.size()) {
      for (size_t i = 0; i < kRingSize; ++i) {
        if (ring_[i].stream != nullptr) f(ring_[i].id, *ring_[i].stream);
      }
    }
    for (const auto& [id, stream] : others_) f(id, *stream);
  }

  std::vector<int64_t> Ids() const {
    std::vector<int64_t> ids;
    ids.reserve(size_);
    ForEach([&ids](int64_t id, const Stream&) { ids.push_back(id); });
    return ids;
  }

  // Drops every stream.
  void Clear() {
    if (ring_ != nullptr) {
      for (size_t i = 0; i < kRingSize; ++i) ring_[i].stream.reset();
    }
    others_.clear();
    ring_spilled_ = 0;
    size_ = 0;
  }

 private:
  // More than the default MAX_STREAMS window of request streams (100): a new stream finds its
  // slot free unless one opened 128 streams earlier is still open. 2 KiB per connection.
  static constexpr size_t kRingSize = 128;

  struct Slot {
    int64_t id = 0;
    std::unique_ptr<Stream> stream;  // null: free
  };

  static bool InRing(int64_t id) { return id >= 0 && (id & 3) == 0; }
  static size_t RingIndex(int64_t id) { return static_cast<size_t>(id >> 2) & (kRingSize - 1); }

  std::unique_ptr<Slot[]> ring_;  // made with the first request stream
  absl::flat_hash_map<int64_t, std::unique_ptr<Stream>> others_;
  size_t ring_spilled_ = 0;  // request streams in others_ (their slot was taken)
  size_t size_ = 0;
};

}  // namespace petrel::quic

#endif  // PETREL_QUIC_CONNECTION_STREAM_MAP_H_
