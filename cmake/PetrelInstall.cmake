# `cmake --install` for Petrel as a library: the public headers (include/petrel), the static
# libraries petrel_common, petrel_quic, petrel_http and petrel_server, and a CMake package, so
# that another project only needs
#
#   find_package(Petrel REQUIRED)
#   target_link_libraries(app PRIVATE Petrel::petrel)
#
# Petrel::petrel is all of Petrel (server, http, quic, common); Petrel::server, Petrel::http,
# Petrel::quic and Petrel::common are exported too, under the names the in-tree aliases use.
# Only the public include directory is exported: the libraries' PRIVATE src/ stays private.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# "All of Petrel" as one interface target, the same in this build (the examples link it) and
# in the installed package.
add_library(petrel INTERFACE)
add_library(Petrel::petrel ALIAS petrel)
target_link_libraries(petrel INTERFACE petrel_server petrel_http petrel_quic petrel_common)

set(_petrel_libraries petrel_common petrel_quic petrel_http petrel_server)
foreach(_lib IN LISTS _petrel_libraries)
  string(REPLACE "petrel_" "" _export_name "${_lib}")
  set_target_properties(${_lib} PROPERTIES EXPORT_NAME ${_export_name})
  # The public headers are C++20: a consumer compiles them as such whatever its own default.
  target_compile_features(${_lib} PUBLIC cxx_std_20)
endforeach()
# A sanitizer build's libraries need the sanitizer runtime wherever they are linked.
if(PETREL_SANITIZE)
  string(REPLACE "," "$<COMMA>" _petrel_san "${PETREL_SANITIZE}")
  target_link_options(petrel INTERFACE "$<INSTALL_INTERFACE:-fsanitize=${_petrel_san}>")
endif()

set(PETREL_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/Petrel" CACHE STRING
    "Where the Petrel CMake package is installed, relative to the prefix")
mark_as_advanced(PETREL_INSTALL_CMAKEDIR)

install(TARGETS ${_petrel_libraries} petrel EXPORT PetrelTargets
        ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}")
# `include`, not CMAKE_INSTALL_INCLUDEDIR: the targets' $<INSTALL_INTERFACE:include> says so.
install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/petrel" DESTINATION include
        FILES_MATCHING PATTERN "*.h")
install(EXPORT PetrelTargets NAMESPACE Petrel:: FILE PetrelTargets.cmake
        DESTINATION "${PETREL_INSTALL_CMAKEDIR}")

# PetrelConfig.cmake finds the dependencies with the same find modules this build used, and
# defaults to the same BoringSSL.
set(PETREL_BORINGSSL_ROOT "${BORINGSSL_ROOT}")
configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/PetrelConfig.cmake.in"
                              "${PROJECT_BINARY_DIR}/PetrelConfig.cmake"
                              INSTALL_DESTINATION "${PETREL_INSTALL_CMAKEDIR}")
# 0.x: minor versions may break the API.
write_basic_package_version_file("${PROJECT_BINARY_DIR}/PetrelConfigVersion.cmake"
                                 VERSION "${PROJECT_VERSION}" COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/PetrelConfig.cmake"
              "${PROJECT_BINARY_DIR}/PetrelConfigVersion.cmake"
              "${PROJECT_SOURCE_DIR}/cmake/FindBoringSSL.cmake"
              "${PROJECT_SOURCE_DIR}/cmake/FindNgtcp2.cmake"
              "${PROJECT_SOURCE_DIR}/cmake/FindNghttp3.cmake"
              "${PROJECT_SOURCE_DIR}/cmake/FindNghttp2.cmake"
              "${PROJECT_SOURCE_DIR}/cmake/FindBrotli.cmake"
              "${PROJECT_SOURCE_DIR}/cmake/FindWslay.cmake"
        DESTINATION "${PETREL_INSTALL_CMAKEDIR}")
