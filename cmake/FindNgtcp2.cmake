# Finds ngtcp2 (Debian's libngtcp2-dev by default). Provides Ngtcp2::Ngtcp2 and NGTCP2_VERSION.
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(PC_NGTCP2 QUIET libngtcp2)
endif()
find_path(NGTCP2_INCLUDE_DIR ngtcp2/ngtcp2.h HINTS ${PC_NGTCP2_INCLUDE_DIRS})
find_library(NGTCP2_LIBRARY NAMES ngtcp2 HINTS ${PC_NGTCP2_LIBRARY_DIRS})
set(NGTCP2_VERSION "${PC_NGTCP2_VERSION}")
if(NOT NGTCP2_VERSION AND NGTCP2_INCLUDE_DIR AND EXISTS "${NGTCP2_INCLUDE_DIR}/ngtcp2/version.h")
  file(STRINGS "${NGTCP2_INCLUDE_DIR}/ngtcp2/version.h" _ver REGEX "^#define NGTCP2_VERSION \"")
  string(REGEX REPLACE ".*\"(.*)\".*" "\\1" NGTCP2_VERSION "${_ver}")
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Ngtcp2 REQUIRED_VARS NGTCP2_LIBRARY NGTCP2_INCLUDE_DIR
                                  VERSION_VAR NGTCP2_VERSION)
if(Ngtcp2_FOUND AND NOT TARGET Ngtcp2::Ngtcp2)
  add_library(Ngtcp2::Ngtcp2 UNKNOWN IMPORTED)
  set_target_properties(Ngtcp2::Ngtcp2 PROPERTIES
    IMPORTED_LOCATION "${NGTCP2_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${NGTCP2_INCLUDE_DIR}")
endif()
mark_as_advanced(NGTCP2_INCLUDE_DIR NGTCP2_LIBRARY)
