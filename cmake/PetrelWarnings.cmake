# petrel_warnings(target): the warning set every Petrel target compiles with.
function(petrel_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wshadow=local -Wnon-virtual-dtor
                                           -Wno-missing-field-initializers)
  if(PETREL_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
