// Public: the cache-line size Petrel pads shared-between-threads data to.
#ifndef PETREL_COMMON_CACHE_LINE_H_
#define PETREL_COMMON_CACHE_LINE_H_

#include <cstddef>

namespace petrel {

// 64 bytes on every x86-64 and most AArch64 parts we target. We do not use
// std::hardware_destructive_interference_size: GCC warns (-Winterference-size) when it is used in
// a header because its value depends on -mtune, which would make struct layouts differ between
// translation units built with different flags.
inline constexpr std::size_t kCacheLineSize = 64;

}  // namespace petrel

#endif  // PETREL_COMMON_CACHE_LINE_H_
