// A fuzz target's property check: on failure it names the property and aborts, so libFuzzer
// keeps the input as a crash artifact.
#ifndef PETREL_FUZZ_FUZZ_CHECK_H_
#define PETREL_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define PETREL_FUZZ_CHECK(cond)                                                          \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "%s:%d: property violated: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)

#endif  // PETREL_FUZZ_FUZZ_CHECK_H_
