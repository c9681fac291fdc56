// Internal: the output half of the HTTP/3 engines — the client's move of nghttp3's pending stream
// data into QUIC streams (the server's connection pulls it instead: H3Connection), and the body
// chunks nghttp3 holds until acknowledged (both).
#ifndef PETREL_HTTP_H3_H3_OUTPUT_H_
#define PETREL_HTTP_H3_H3_OUTPUT_H_

#include <nghttp3/nghttp3.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "petrel/quic/quic_connection.h"

namespace petrel::http {

// Writes everything nghttp3 offers into `conn` with QuicConnection::Write, which copies it into
// the stream's queue: what was accepted is written and acknowledged to nghttp3 at once
// (nghttp3_conn_add_write_offset, nghttp3_conn_add_ack_offset), so nghttp3 may free the bytes.
// A stream whose write is refused is blocked in nghttp3 and added to `blocked` (unblock it on
// on_stream_writable). `on_fin` runs for each stream whose FIN was queued. Returns 0 or
// nghttp3's (fatal) error.
int WriteH3Output(nghttp3_conn* h3, QuicConnection& conn, absl::flat_hash_set<int64_t>& blocked,
                  absl::FunctionRef<void(int64_t stream)> on_fin);

// Body chunks handed to nghttp3 and not yet acknowledged by it, in order: a producer's strings
// and file blocks (BodyBlocks, given back when acknowledged). Pushing a chunk never moves the
// bytes nghttp3 still points at. The first chunk of an empty queue is kept in place (most
// responses are one chunk): an empty queue and a one-chunk response allocate nothing here.
class H3ChunkQueue {
 public:
  H3ChunkQueue() = default;
  H3ChunkQueue(const H3ChunkQueue&) = delete;
  H3ChunkQueue& operator=(const H3ChunkQueue&) = delete;
  ~H3ChunkQueue() { Clear(); }

  // Keeps `chunk` alive until acknowledged; returns a view nghttp3 may point at.
  absl::string_view Push(std::string chunk);
  // The same for the first `used` bytes of a BodyBlocks block of `capacity` bytes.
  absl::string_view PushBlock(std::unique_ptr<char[]> block, size_t capacity, size_t used);
  // nghttp3's acked_stream_data: drops `bytes` from the front.
  void Ack(uint64_t bytes);
  void Clear();
  bool empty() const { return !first_live_ && rest_.empty(); }

 private:
  struct Chunk {
    std::string text;               // a producer's bytes, or
    std::unique_ptr<char[]> block;  // a file block, `used` of its `capacity` bytes
    size_t capacity = 0;
    size_t used = 0;

    absl::string_view bytes() const {
      return block != nullptr ? absl::string_view(block.get(), used) : absl::string_view(text);
    }
    void Release();  // gives the block back; leaves an empty chunk
  };
  // Where the next chunk goes: first_ when the queue is empty, else a new entry of rest_.
  Chunk& NextSlot();

  Chunk first_;  // the oldest chunk, when first_live_
  bool first_live_ = false;
  std::deque<Chunk> rest_;  // later chunks (push_back and pop_front never move the others)
  size_t front_acked_ = 0;  // bytes of the oldest chunk already acknowledged
};

}  // namespace petrel::http

#endif  // PETREL_HTTP_H3_H3_OUTPUT_H_
