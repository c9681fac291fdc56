# Finds brotli's encoder (Debian's libbrotli-dev). Provides Brotli::enc and, for tests that check
# what Petrel compressed, Brotli::dec.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(PC_BROTLIENC QUIET libbrotlienc)
  pkg_check_modules(PC_BROTLIDEC QUIET libbrotlidec)
endif()
find_path(BROTLI_INCLUDE_DIR brotli/encode.h HINTS ${PC_BROTLIENC_INCLUDE_DIRS})
find_library(BROTLI_ENC_LIBRARY NAMES brotlienc HINTS ${PC_BROTLIENC_LIBRARY_DIRS})
find_library(BROTLI_DEC_LIBRARY NAMES brotlidec HINTS ${PC_BROTLIDEC_LIBRARY_DIRS})
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Brotli REQUIRED_VARS BROTLI_ENC_LIBRARY BROTLI_DEC_LIBRARY
                                  BROTLI_INCLUDE_DIR)
if(Brotli_FOUND AND NOT TARGET Brotli::enc)
  add_library(Brotli::enc UNKNOWN IMPORTED)
  set_target_properties(Brotli::enc PROPERTIES IMPORTED_LOCATION "${BROTLI_ENC_LIBRARY}"
                                               INTERFACE_INCLUDE_DIRECTORIES "${BROTLI_INCLUDE_DIR}")
  add_library(Brotli::dec UNKNOWN IMPORTED)
  set_target_properties(Brotli::dec PROPERTIES IMPORTED_LOCATION "${BROTLI_DEC_LIBRARY}"
                                               INTERFACE_INCLUDE_DIRECTORIES "${BROTLI_INCLUDE_DIR}")
endif()
mark_as_advanced(BROTLI_INCLUDE_DIR BROTLI_ENC_LIBRARY BROTLI_DEC_LIBRARY)
