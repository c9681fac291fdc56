// Internal: the allocator a Connection hands its ngtcp2_conn (ngtcp2_mem). It keeps every block
// the conn holds on a list, and frees whatever is still there once the conn has been deleted.
//
// Why: ngtcp2 0.12.1 loses STREAM frame chains under loss. It takes a chain with more than three
// data vectors from the allocator and a smaller one from the conn's object pool, and decides how
// to give a chain back by its vector count at that moment; retransmitting part of a lost frame
// shrinks the count in place (ngtcp2_strm_streamfrq_unacked_pop), so an allocator block goes into
// the pool, and the pool frees only its own slabs when the conn is deleted. Each lossy
// connection would leave a few hundred bytes behind (fixed in ngtcp2 1.6.0). The list costs two
// pointers per block and a few instructions per allocation; ngtcp2 allocates per connection,
// stream and large frame, not per packet.
//
// Thread: the connection's. Not movable: the ngtcp2_mem points at it.
#ifndef PETREL_QUIC_CONNECTION_CONNECTION_MEMORY_H_
#define PETREL_QUIC_CONNECTION_CONNECTION_MEMORY_H_

#include <ngtcp2/ngtcp2.h>

#include <cstddef>

namespace petrel::quic {

class ConnectionMemory {
 public:
  ConnectionMemory();
  // Frees every block still held: call it after ngtcp2_conn_del.
  ~ConnectionMemory();
  ConnectionMemory(const ConnectionMemory&) = delete;
  ConnectionMemory& operator=(const ConnectionMemory&) = delete;

  const ngtcp2_mem* mem() const { return &mem_; }
  // Blocks held now.
  size_t blocks() const { return blocks_; }

 private:
  // In front of every block; two pointers keep the caller's bytes at malloc's alignment.
  struct Header {
    Header* prev;
    Header* next;
  };
  static_assert(sizeof(Header) % alignof(std::max_align_t) == 0);

  static void* Malloc(size_t size, void* user_data);
  static void Free(void* ptr, void* user_data);
  static void* Calloc(size_t nmemb, size_t size, void* user_data);
  static void* Realloc(void* ptr, size_t size, void* user_data);

  void* Link(Header* h);
  Header* Unlink(void* ptr);

  ngtcp2_mem mem_;
  Header head_{&head_, &head_};  // a ring: the list is empty when head_ points at itself
  size_t blocks_ = 0;
};

}  // namespace petrel::quic

#endif  // PETREL_QUIC_CONNECTION_CONNECTION_MEMORY_H_
