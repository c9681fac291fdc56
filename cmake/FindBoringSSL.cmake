# Finds BoringSSL. Defaults to Debian's android-libboringssl-dev layout; set
# -DBORINGSSL_ROOT=<dir> (with include/ and lib/ or build/ inside) for another build.
#
# Provides BoringSSL::ssl and BoringSSL::crypto, and BORINGSSL_LIBRARY_DIR for rpaths.
# Fails the configure step if the headers found are not BoringSSL's (OpenSSL 3 must never
# reach a Petrel target: its symbols share names with BoringSSL's).

set(BORINGSSL_ROOT "" CACHE PATH "Root of a BoringSSL build (empty: Debian's android-libboringssl-dev)")

if(BORINGSSL_ROOT)
  set(_bssl_inc_hints "${BORINGSSL_ROOT}/include")
  set(_bssl_lib_hints "${BORINGSSL_ROOT}/lib" "${BORINGSSL_ROOT}/build" "${BORINGSSL_ROOT}/build/ssl"
                      "${BORINGSSL_ROOT}/build/crypto" "${BORINGSSL_ROOT}")
else()
  set(_bssl_inc_hints "/usr/include/android")
  set(_bssl_lib_hints "/usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/android" "/usr/lib/x86_64-linux-gnu/android"
                      "/usr/lib/aarch64-linux-gnu/android")
endif()

# NO_DEFAULT_PATH: the system include dir holds OpenSSL 3's openssl/ssl.h, which must not win.
find_path(BORINGSSL_INCLUDE_DIR openssl/base.h HINTS ${_bssl_inc_hints} NO_DEFAULT_PATH)
find_library(BORINGSSL_SSL_LIBRARY NAMES ssl HINTS ${_bssl_lib_hints} NO_DEFAULT_PATH)
find_library(BORINGSSL_CRYPTO_LIBRARY NAMES crypto HINTS ${_bssl_lib_hints} NO_DEFAULT_PATH)

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(BoringSSL
  REQUIRED_VARS BORINGSSL_INCLUDE_DIR BORINGSSL_SSL_LIBRARY BORINGSSL_CRYPTO_LIBRARY
  FAIL_MESSAGE "BoringSSL not found: run scripts/install-deps.sh (android-libboringssl-dev) or set -DBORINGSSL_ROOT=")

if(BoringSSL_FOUND)
  if(NOT EXISTS "${BORINGSSL_INCLUDE_DIR}/openssl/base.h")
    message(FATAL_ERROR "BoringSSL: ${BORINGSSL_INCLUDE_DIR}/openssl/base.h is missing")
  endif()
  file(STRINGS "${BORINGSSL_INCLUDE_DIR}/openssl/base.h" _bssl_is LIMIT_COUNT 1
       REGEX "^#define OPENSSL_IS_BORINGSSL")
  if(NOT _bssl_is)
    message(FATAL_ERROR "BoringSSL: ${BORINGSSL_INCLUDE_DIR} holds OpenSSL headers, not BoringSSL's. "
                        "Petrel must not be built against OpenSSL 3.")
  endif()
  file(STRINGS "${BORINGSSL_INCLUDE_DIR}/openssl/base.h" _bssl_api REGEX "^#define BORINGSSL_API_VERSION")
  string(REGEX REPLACE ".*BORINGSSL_API_VERSION ([0-9]+).*" "\\1" BORINGSSL_API_VERSION "${_bssl_api}")
  foreach(_lib IN ITEMS "${BORINGSSL_SSL_LIBRARY}" "${BORINGSSL_CRYPTO_LIBRARY}")
    get_filename_component(_real "${_lib}" REALPATH)
    if(_real MATCHES "\\.so\\.3$")
      message(FATAL_ERROR "BoringSSL: ${_lib} resolves to ${_real}, an OpenSSL 3 library")
    endif()
  endforeach()
  get_filename_component(BORINGSSL_LIBRARY_DIR "${BORINGSSL_SSL_LIBRARY}" DIRECTORY)
  message(STATUS "BoringSSL API ${BORINGSSL_API_VERSION}: ${BORINGSSL_INCLUDE_DIR}, ${BORINGSSL_LIBRARY_DIR}")

  if(NOT TARGET BoringSSL::crypto)
    add_library(BoringSSL::crypto UNKNOWN IMPORTED)
    set_target_properties(BoringSSL::crypto PROPERTIES
      IMPORTED_LOCATION "${BORINGSSL_CRYPTO_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${BORINGSSL_INCLUDE_DIR}")
    add_library(BoringSSL::ssl UNKNOWN IMPORTED)
    set_target_properties(BoringSSL::ssl PROPERTIES
      IMPORTED_LOCATION "${BORINGSSL_SSL_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${BORINGSSL_INCLUDE_DIR}"
      INTERFACE_LINK_LIBRARIES BoringSSL::crypto)
  endif()
endif()
mark_as_advanced(BORINGSSL_INCLUDE_DIR BORINGSSL_SSL_LIBRARY BORINGSSL_CRYPTO_LIBRARY)
