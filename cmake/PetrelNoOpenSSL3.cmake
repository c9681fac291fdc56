# OpenSSL 3 shares symbol names with BoringSSL; one of its headers or libraries in a Petrel
# target gives a binary that links and then fails at run time. Refuse it at configure time.

include(CheckCXXSourceCompiles)
set(CMAKE_REQUIRED_INCLUDES "${BORINGSSL_INCLUDE_DIR}")
set(CMAKE_REQUIRED_QUIET ON)
check_cxx_source_compiles([[
#include <openssl/ssl.h>
#ifndef OPENSSL_IS_BORINGSSL
#error "not BoringSSL"
#endif
int main() { return SSL_CTX_set_quic_method == nullptr; }
]] PETREL_OPENSSL_IS_BORINGSSL)
unset(CMAKE_REQUIRED_INCLUDES)
unset(CMAKE_REQUIRED_QUIET)
if(NOT PETREL_OPENSSL_IS_BORINGSSL)
  message(FATAL_ERROR "<openssl/ssl.h> from ${BORINGSSL_INCLUDE_DIR} is not BoringSSL with the QUIC API")
endif()

function(_petrel_collect_targets dir out)
  get_property(_targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  get_property(_subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(_sub IN LISTS _subdirs)
    _petrel_collect_targets("${_sub}" _more)
    list(APPEND _targets ${_more})
  endforeach()
  set(${out} ${_targets} PARENT_SCOPE)
endfunction()

# Fails if any target of the project names OpenSSL's CMake targets, an OpenSSL 3 library file,
# or OpenSSL's include directory.
function(petrel_assert_no_openssl3)
  _petrel_collect_targets("${CMAKE_SOURCE_DIR}" _all)
  foreach(_t IN LISTS _all)
    get_target_property(_type ${_t} TYPE)
    if(_type STREQUAL "INTERFACE_LIBRARY" OR _type STREQUAL "UTILITY")
      continue()
    endif()
    get_target_property(_libs ${_t} LINK_LIBRARIES)
    get_target_property(_incs ${_t} INCLUDE_DIRECTORIES)
    foreach(_l IN LISTS _libs)
      if(_l MATCHES "^OpenSSL::" OR _l MATCHES "lib(ssl|crypto)\\.so\\.3" OR
         (_l MATCHES "lib(ssl|crypto)\\.(so|a)$" AND NOT _l MATCHES "/android/|${BORINGSSL_LIBRARY_DIR}"))
        message(FATAL_ERROR "Target ${_t} links ${_l}: OpenSSL 3 must not reach a Petrel target")
      endif()
    endforeach()
    foreach(_i IN LISTS _incs)
      if(EXISTS "${_i}/openssl/ssl.h" AND NOT _i STREQUAL BORINGSSL_INCLUDE_DIR)
        message(FATAL_ERROR "Target ${_t} has include directory ${_i} with OpenSSL headers")
      endif()
    endforeach()
  endforeach()
endfunction()
