# Test tiers (docs/TESTING.md). Every ctest entry carries one tier label:
#   default  what scripts/test runs: a newcomer's check, minutes from an empty clone
#   full     what scripts/test --full (CI) adds: the sanitizer and fuzz builds, the hardware
#            regression and its mutation tests, gpu-check without the packages, the large preset's
#            RTL, the trained model's whole held-out text, the Yosys equivalence proof
# An entry is in the full tier unless it is named here as default, so that a new heavy entry cannot
# slip into the newcomer's run by being forgotten.
#
# TESSERA_TEST_TIER says what a build is for: `default` verilates the presets of the default tier
# only (small and default, int8-only, and small-bf16), `full` every preset. A plain CMake configure is `full`; scripts/build
# makes a new build directory `default`, and scripts/test --full turns it `full`.
set(TESSERA_TEST_TIER full CACHE STRING "What the build is for: default (presets small, default, small-bf16) or full (all)")
set_property(CACHE TESSERA_TEST_TIER PROPERTY STRINGS default full)
if(NOT TESSERA_TEST_TIER MATCHES "^(default|full)$")
  message(FATAL_ERROR "TESSERA_TEST_TIER is '${TESSERA_TEST_TIER}': give default or full")
endif()
set(TESSERA_DEFAULT_TIER_PRESETS small default small-bf16)

# The named entries are in the default tier.
function(tessera_default_tier)
  set_property(TEST ${ARGN} APPEND PROPERTY LABELS default)
endfunction()

# Every entry of this directory not in the default tier is in the full one; call it last.
function(tessera_full_tier_rest)
  get_property(tests DIRECTORY PROPERTY TESTS)
  foreach(test IN LISTS tests)
    get_test_property(${test} LABELS labels)
    if(NOT "default" IN_LIST labels)
      set_property(TEST ${test} APPEND PROPERTY LABELS full)
    endif()
  endforeach()
endfunction()

# An entry that uses both cores (a build at -j 2, a regression with two jobs): ctest runs it with no
# other entry beside it, and never two of them side by side, whatever -j says.
function(tessera_uses_both_cores)
  set_tests_properties(${ARGN} PROPERTIES PROCESSORS 2 RESOURCE_LOCK both_cores)
endfunction()

# catch_discover_tests with its entries' labels (a tier among them): its PROPERTIES lose a list's
# separators, so the labels are set by a file that ctest reads after the discovered entries.
# Arguments after the labels go to catch_discover_tests.
function(tessera_discover_tests target list labels)
  catch_discover_tests(${target} TEST_LIST ${list} ${ARGN})
  set(file ${CMAKE_CURRENT_BINARY_DIR}/${list}_labels.cmake)
  file(WRITE ${file} "if(${list})\n  set_tests_properties(\${${list}} PROPERTIES LABELS \"${labels}\")\nendif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${file})
endfunction()
