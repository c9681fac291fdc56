# Finds nghttp3 (Debian's libnghttp3-dev by default). Provides Nghttp3::Nghttp3 and NGHTTP3_VERSION.
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(PC_NGHTTP3 QUIET libnghttp3)
endif()
find_path(NGHTTP3_INCLUDE_DIR nghttp3/nghttp3.h HINTS ${PC_NGHTTP3_INCLUDE_DIRS})
find_library(NGHTTP3_LIBRARY NAMES nghttp3 HINTS ${PC_NGHTTP3_LIBRARY_DIRS})
set(NGHTTP3_VERSION "${PC_NGHTTP3_VERSION}")
if(NOT NGHTTP3_VERSION AND NGHTTP3_INCLUDE_DIR AND EXISTS "${NGHTTP3_INCLUDE_DIR}/nghttp3/version.h")
  file(STRINGS "${NGHTTP3_INCLUDE_DIR}/nghttp3/version.h" _ver REGEX "^#define NGHTTP3_VERSION \"")
  string(REGEX REPLACE ".*\"(.*)\".*" "\\1" NGHTTP3_VERSION "${_ver}")
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Nghttp3 REQUIRED_VARS NGHTTP3_LIBRARY NGHTTP3_INCLUDE_DIR
                                  VERSION_VAR NGHTTP3_VERSION)
if(Nghttp3_FOUND AND NOT TARGET Nghttp3::Nghttp3)
  add_library(Nghttp3::Nghttp3 UNKNOWN IMPORTED)
  set_target_properties(Nghttp3::Nghttp3 PROPERTIES
    IMPORTED_LOCATION "${NGHTTP3_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${NGHTTP3_INCLUDE_DIR}")
endif()
mark_as_advanced(NGHTTP3_INCLUDE_DIR NGHTTP3_LIBRARY)
