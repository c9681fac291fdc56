// Internal: the buffers HTTP/3 reads file bodies into. A std::string chunk would be zeroed by
// its resize before every pread and allocated anew for every chunk; these blocks are neither:
// a thread keeps the blocks its streams have finished with and hands them out again, so a bulk
// download reads each chunk straight from the file into a block it already has.
//
// Bounded: a thread keeps at most kMaxCachedBytes of free blocks, of one size (the first size it
// is asked for; blocks of other sizes go to and from the heap). Loop thread only, no locks.
#ifndef PETREL_HTTP_H3_BODY_BLOCKS_H_
#define PETREL_HTTP_H3_BODY_BLOCKS_H_

#include <cstddef>
#include <memory>

namespace petrel::http {

class BodyBlocks {
 public:
  // Enough for the chunks in flight of a few fast downloads at the default 64 KiB chunk size.
  static constexpr size_t kMaxCachedBytes = 2 * 1024 * 1024;

  // A block of `size` bytes (uninitialised).
  static std::unique_ptr<char[]> Take(size_t size);
  // Gives back a block of `size` bytes for reuse by this thread (or frees it).
  static void Give(std::unique_ptr<char[]> block, size_t size);
};

}  // namespace petrel::http

#endif  // PETREL_HTTP_H3_BODY_BLOCKS_H_
