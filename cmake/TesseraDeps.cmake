# The libraries Tessera builds on: fmt, nlohmann-json, Boost.Program_options, OpenBLAS (cblas), PCRE2
# (the tokenizer's pattern) and zlib. Each comes from its package's CMake or pkg-config files where the system has them; where it
# does not (a GPU machine with no package registry), from plain headers and libraries under
# CMAKE_PREFIX_PATH, such as the prefix scripts/gpu-deps packs on a machine that has the packages.
# Either way the same imported targets result: fmt::fmt, nlohmann_json::nlohmann_json,
# Boost::program_options, tessera::openblas, tessera::pcre2 and ZLIB::ZLIB.

find_package(fmt QUIET)
if(NOT TARGET fmt::fmt)
  find_path(FMT_INCLUDE_DIR fmt/format.h REQUIRED)
  find_library(FMT_LIBRARY fmt REQUIRED)
  add_library(fmt::fmt UNKNOWN IMPORTED)
  set_target_properties(fmt::fmt PROPERTIES IMPORTED_LOCATION ${FMT_LIBRARY}
                                            INTERFACE_INCLUDE_DIRECTORIES ${FMT_INCLUDE_DIR})
endif()

find_package(nlohmann_json 3 QUIET)
if(NOT TARGET nlohmann_json::nlohmann_json)
  find_path(NLOHMANN_JSON_INCLUDE_DIR nlohmann/json.hpp REQUIRED)
  add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
  set_target_properties(nlohmann_json::nlohmann_json PROPERTIES INTERFACE_INCLUDE_DIRECTORIES ${NLOHMANN_JSON_INCLUDE_DIR})
endif()

find_package(Boost 1.74 CONFIG QUIET COMPONENTS program_options)
if(NOT TARGET Boost::program_options)
  find_path(BOOST_PO_INCLUDE_DIR boost/program_options.hpp REQUIRED)
  find_library(BOOST_PO_LIBRARY boost_program_options REQUIRED)
  add_library(Boost::program_options UNKNOWN IMPORTED)
  # The shared library, with no auto-linking: the definitions Boost's own CMake files give.
  set_target_properties(Boost::program_options PROPERTIES
    IMPORTED_LOCATION ${BOOST_PO_LIBRARY} INTERFACE_INCLUDE_DIRECTORIES ${BOOST_PO_INCLUDE_DIR}
    INTERFACE_COMPILE_DEFINITIONS "BOOST_ALL_NO_LIB;BOOST_PROGRAM_OPTIONS_DYN_LINK")
endif()

find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(OPENBLAS QUIET IMPORTED_TARGET openblas)
endif()
add_library(tessera::openblas INTERFACE IMPORTED)
if(TARGET PkgConfig::OPENBLAS)
  target_link_libraries(tessera::openblas INTERFACE PkgConfig::OPENBLAS)
else()
  find_path(OPENBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas REQUIRED)
  find_library(OPENBLAS_LIBRARY openblas REQUIRED)
  target_include_directories(tessera::openblas INTERFACE ${OPENBLAS_INCLUDE_DIR})
  target_link_libraries(tessera::openblas INTERFACE ${OPENBLAS_LIBRARY})
endif()

if(PKG_CONFIG_FOUND)
  pkg_check_modules(PCRE2 QUIET IMPORTED_TARGET libpcre2-8)
endif()
add_library(tessera::pcre2 INTERFACE IMPORTED)
if(TARGET PkgConfig::PCRE2)
  target_link_libraries(tessera::pcre2 INTERFACE PkgConfig::PCRE2)
else()
  find_path(PCRE2_INCLUDE_DIR pcre2.h REQUIRED)
  find_library(PCRE2_LIBRARY pcre2-8 REQUIRED)
  target_include_directories(tessera::pcre2 INTERFACE ${PCRE2_INCLUDE_DIR})
  target_link_libraries(tessera::pcre2 INTERFACE ${PCRE2_LIBRARY})
endif()

find_package(ZLIB REQUIRED)  # FindZLIB searches CMAKE_PREFIX_PATH too
