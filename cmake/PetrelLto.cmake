# Link-time optimisation for the binaries Petrel ships: petrel-server, the client and load tools,
# the interop endpoint. Petrel's layers call each other across files on every request (HTTP/3 ->
# QUIC write pass -> timers, the engines -> Request/Response), small calls that only the
# linker can inline. Petrel's sources are compiled "fat" (LTO bytecode and machine code in each
# object), so tests and benchmarks link the same libraries as ordinary objects: the test build
# pays the compile, not an LTO link per test binary. GCC and optimised builds without
# sanitizers or fuzzing only; -DPETREL_LTO=OFF turns it off.
option(PETREL_LTO "Link-time optimisation for the shipped binaries (GCC, optimised builds)" ON)
set(PETREL_LTO_ACTIVE OFF)
if(PETREL_LTO AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND PETREL_SANITIZE STREQUAL ""
   AND NOT PETREL_FUZZ AND CMAKE_BUILD_TYPE MATCHES "^(Release|RelWithDebInfo|MinSizeRel)$")
  set(PETREL_LTO_ACTIVE ON)
endif()

# petrel_lto_objects(): Petrel's sources in the calling directory (and below) compile fat.
macro(petrel_lto_objects)
  if(PETREL_LTO_ACTIVE)
    add_compile_options(-flto=auto -ffat-lto-objects)
  endif()
endmacro()

# petrel_lto_link_off(): executables created from here on (the calling directory and below) link
# the fat objects as ordinary ones. GCC's linker plugin otherwise optimises any link that
# sees LTO bytecode, and a -fno-lto anywhere on a link line wins over -flto, so this is set
# only where no shipped binary is made.
macro(petrel_lto_link_off)
  if(PETREL_LTO_ACTIVE)
    add_link_options(-fno-lto)
  endif()
endmacro()

# petrel_lto_link(target): links a shipped binary with link-time optimisation.
function(petrel_lto_link target)
  if(PETREL_LTO_ACTIVE)
    target_link_options(${target} PRIVATE -flto=auto)
  endif()
endfunction()
