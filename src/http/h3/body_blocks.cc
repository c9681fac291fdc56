#include "http/h3/body_blocks.h"

#include <utility>
#include <vector>

namespace petrel::http {
namespace {

struct FreeBlocks {
  size_t size = 0;  // the size of every block in `blocks`
  std::vector<std::unique_ptr<char[]>> blocks;
};

FreeBlocks& ThreadFreeBlocks() {
  thread_local FreeBlocks free_blocks;
  return free_blocks;
}

}  // namespace

std::unique_ptr<char[]> BodyBlocks::Take(size_t size) {
  FreeBlocks& f = ThreadFreeBlocks();
  if (size == f.size && !f.blocks.empty()) {
    std::unique_ptr<char[]> block = std::move(f.blocks.back());
    f.blocks.pop_back();
    return block;
  }
  // new char[] leaves the bytes uninitialised (no value-initialisation): no zero fill.
  return std::unique_ptr<char[]>(new char[size]);
}

void BodyBlocks::Give(std::unique_ptr<char[]> block, size_t size) {
  if (block == nullptr || size == 0) return;
  FreeBlocks& f = ThreadFreeBlocks();
  if (f.blocks.empty()) f.size = size;  // an empty cache takes the size it is given
  if (size != f.size || (f.blocks.size() + 1) * size > kMaxCachedBytes) return;  // freed
  f.blocks.push_back(std::move(block));
}

}  // namespace petrel::http
