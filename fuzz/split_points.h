// Where a target cuts its input to check that a parser's result does not depend on how the
// bytes arrived: points drawn from a hash of the input, so an input always replays the same way.
#ifndef PETREL_FUZZ_SPLIT_POINTS_H_
#define PETREL_FUZZ_SPLIT_POINTS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/strings/string_view.h"

namespace petrel::fuzz {

// Up to `count` distinct cut points in (0, input.size()), ascending.
inline std::vector<size_t> SplitPoints(absl::string_view input, size_t count) {
  std::vector<size_t> cuts;
  if (input.size() < 2) return cuts;
  uint64_t h = 0x9e3779b97f4a7c15u ^ input.size();
  for (unsigned char c : input) h = (h ^ c) * 0x100000001b3u;
  for (size_t i = 0; i < count; ++i) {
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9u;
    h ^= h >> 32;
    cuts.push_back(1 + static_cast<size_t>(h % (input.size() - 1)));
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  return cuts;
}

// Every point, for inputs short enough that feeding them byte by byte is cheap.
inline std::vector<size_t> EveryPoint(absl::string_view input) {
  std::vector<size_t> cuts;
  for (size_t i = 1; i < input.size(); ++i) cuts.push_back(i);
  return cuts;
}

}  // namespace petrel::fuzz

#endif  // PETREL_FUZZ_SPLIT_POINTS_H_
