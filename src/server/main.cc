// petrel-server: until the HTTP engines exist, this binary only reports what it is built from.
#include <cstdio>
#include <cstring>

#include "petrel/version.h"

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--version") == 0) {
      std::printf("%s\n", petrel::VersionLine().c_str());
      return 0;
    }
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::printf(
          "usage: petrel-server [--version] [--help]\n\n"
          "Petrel's HTTP/1.1, HTTP/2 and HTTP/3 engines are not built yet: this binary serves\n"
          "nothing. It reports the library versions it was built with (--version).\n");
      return 0;
    }
  }
  std::fprintf(stderr,
               "petrel-server: no server exists yet in this build (the HTTP engines are still to "
               "come).\n%s\n",
               petrel::VersionLine().c_str());
  return 2;
}
