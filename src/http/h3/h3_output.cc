#include "http/h3/h3_output.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/string_view.h"
#include "http/h3/body_blocks.h"

namespace petrel::http {

int WriteH3Output(nghttp3_conn* h3, QuicConnection& conn, absl::flat_hash_set<int64_t>& blocked,
                  absl::FunctionRef<void(int64_t stream)> on_fin) {
  nghttp3_vec vec[16];
  for (;;) {
    int64_t stream = -1;
    int fin = 0;
    const nghttp3_ssize n = nghttp3_conn_writev_stream(h3, &stream, &fin, vec, 16);
    if (n < 0) return static_cast<int>(n);
    if (stream < 0) return 0;
    size_t written = 0;
    bool refused = false;
    for (nghttp3_ssize i = 0; i < n; ++i) {
      const bool last = i + 1 == n;
      const absl::string_view bytes(reinterpret_cast<const char*>(vec[i].base), vec[i].len);
      if (!conn.Write(stream, bytes, fin != 0 && last)) {
        refused = true;
        break;
      }
      written += bytes.size();
    }
    if (n == 0 && fin != 0 && !conn.Write(stream, {}, true)) refused = true;
    if (refused) {
      // Full queue (on_stream_writable follows) or a stream that can no longer be written
      // (reset or closing: its close ends it in nghttp3). Either way nghttp3 must stop
      // offering it.
      nghttp3_conn_block_stream(h3, stream);
      blocked.insert(stream);
      if (written == 0) continue;
    } else if (fin != 0) {
      on_fin(stream);
    }
    if (int rv = nghttp3_conn_add_write_offset(h3, stream, written); rv != 0) return rv;
    if (int rv = nghttp3_conn_add_ack_offset(h3, stream, written); rv != 0) return rv;
  }
}

void H3ChunkQueue::Chunk::Release() {
  if (block != nullptr) BodyBlocks::Give(std::move(block), capacity);
  text.clear();
  capacity = 0;
  used = 0;
}

H3ChunkQueue::Chunk& H3ChunkQueue::NextSlot() {
  // An empty queue's first_ was released when it emptied (Ack, Clear): reuse it in place.
  if (empty()) {
    first_live_ = true;
    front_acked_ = 0;
    return first_;
  }
  return rest_.emplace_back();
}

absl::string_view H3ChunkQueue::Push(std::string chunk) {
  Chunk& c = NextSlot();
  c.text = std::move(chunk);
  return c.bytes();
}

absl::string_view H3ChunkQueue::PushBlock(std::unique_ptr<char[]> block, size_t capacity,
                                          size_t used) {
  Chunk& c = NextSlot();
  c.block = std::move(block);
  c.capacity = capacity;
  c.used = used;
  return c.bytes();
}

void H3ChunkQueue::Ack(uint64_t bytes) {
  while (bytes > 0 && !empty()) {
    Chunk& front = first_live_ ? first_ : rest_.front();
    const size_t size = front.bytes().size();
    const size_t n = static_cast<size_t>(std::min<uint64_t>(bytes, size - front_acked_));
    front_acked_ += n;
    bytes -= n;
    if (front_acked_ == size) {
      front.Release();
      if (first_live_) {
        first_live_ = false;
      } else {
        rest_.pop_front();
      }
      front_acked_ = 0;
    }
  }
}

void H3ChunkQueue::Clear() {
  if (empty()) return;  // everything was released as it was acknowledged
  first_.Release();
  first_live_ = false;
  for (Chunk& c : rest_) c.Release();
  rest_.clear();
  front_acked_ = 0;
}

}  // namespace petrel::http
