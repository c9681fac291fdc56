# petrel_warnings(target): the warning set every Petrel target compiles with.
function(petrel_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wnon-virtual-dtor
                                           -Wno-missing-field-initializers)
  # GCC's shadowing check limited to locals; clang (the fuzz build) has no such option.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${target} PRIVATE -Wshadow=local)
  else()
    # Deliberate in Petrel: branch-free `&` of booleans in scanners, and observer interfaces
    # whose implementations override one overload of a name.
    target_compile_options(${target} PRIVATE -Wno-bitwise-instead-of-logical -Wno-overloaded-virtual)
  endif()
  if(PETREL_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
