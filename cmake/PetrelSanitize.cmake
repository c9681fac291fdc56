# -DPETREL_SANITIZE=address,undefined | thread
if(PETREL_SANITIZE)
  if(PETREL_SANITIZE STREQUAL "address,undefined" OR PETREL_SANITIZE STREQUAL "undefined,address"
     OR PETREL_SANITIZE STREQUAL "address" OR PETREL_SANITIZE STREQUAL "undefined")
    set(_san_flags -fsanitize=${PETREL_SANITIZE} -fno-sanitize-recover=undefined
                   -fno-omit-frame-pointer)
  elseif(PETREL_SANITIZE STREQUAL "thread")
    set(_san_flags -fsanitize=thread -fno-omit-frame-pointer)
  else()
    message(FATAL_ERROR "PETREL_SANITIZE must be 'address,undefined' or 'thread', not '${PETREL_SANITIZE}'")
  endif()
  add_compile_options(${_san_flags})
  add_link_options(${_san_flags})
  add_compile_definitions(PETREL_SANITIZED=1)
  message(STATUS "Sanitizers: ${PETREL_SANITIZE}")
endif()
