# Sanitizer and fuzzing builds (docs/TESTING.md).
#
#   TESSERA_SANITIZE  a comma-separated list for -fsanitize=: "address,undefined" or "thread" (or
#                     "address", "undefined"). Every target is built with it, and UBSan aborts on
#                     the first error (-fno-sanitize-recover=all), so a finding fails its test.
#   TESSERA_FUZZ      builds the libFuzzer harnesses of tests/fuzz (clang only). Every target then
#                     carries libFuzzer's coverage instrumentation, so the parsers it calls are
#                     instrumented too.
if(TESSERA_SANITIZE)
  string(REPLACE "," ";" _tessera_sanitizers "${TESSERA_SANITIZE}")
  foreach(_s IN LISTS _tessera_sanitizers)
    if(NOT _s MATCHES "^(address|undefined|thread|leak)$")
      message(FATAL_ERROR "TESSERA_SANITIZE: unknown sanitizer '${_s}' (address, undefined, thread, leak)")
    endif()
  endforeach()
  if("thread" IN_LIST _tessera_sanitizers AND
     ("address" IN_LIST _tessera_sanitizers OR "leak" IN_LIST _tessera_sanitizers))
    message(FATAL_ERROR "TESSERA_SANITIZE: thread cannot be combined with address or leak")
  endif()
  message(STATUS "Tessera: sanitizers ${TESSERA_SANITIZE}")
  add_compile_options(
    "$<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${TESSERA_SANITIZE};-fno-sanitize-recover=all;-fno-omit-frame-pointer>")
  add_link_options(-fsanitize=${TESSERA_SANITIZE} -fno-sanitize-recover=all)
endif()

if(TESSERA_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "TESSERA_FUZZ needs clang (libFuzzer), not ${CMAKE_CXX_COMPILER_ID}: "
                        "configure with -DCMAKE_CXX_COMPILER=clang++")
  endif()
  message(STATUS "Tessera: libFuzzer harnesses (tests/fuzz), every target with coverage instrumentation")
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link>")
endif()
