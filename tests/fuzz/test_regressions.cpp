// Regression tests for what the fuzzers and sanitizers found (docs/TESTING.md) where the input is
// too big to keep as a file in tests/fuzz/regressions: built in memory here instead.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "tessera/io/safetensors.hpp"
#include "tessera/runtime/plan.hpp"

using namespace tessera;
namespace fs = std::filesystem;

namespace {

fs::path write_safetensors_header(const std::string& header, const std::string& name) {
  const fs::path p = fs::temp_directory_path() / (name + "-" + std::to_string(::getpid()) + ".safetensors");
  std::ofstream out(p, std::ios::binary);
  const uint64_t size = header.size();
  out.write(reinterpret_cast<const char*>(&size), 8);
  out << header;
  return p;
}

}  // namespace

TEST_CASE("a deeply nested safetensors header is a ModelError, not a stack overflow", "[unit][fuzz]") {
  // The error message once dumped the offending shape entry, recursing once per level.
  constexpr size_t kDepth = 300'000;
  const std::string nested = std::string(kDepth, '[') + std::string(kDepth, ']');
  const fs::path p = write_safetensors_header(
      R"({"x":{"dtype":"F32","shape":[)" + nested + R"(],"data_offsets":[0,0]}})", "deep");
  CHECK_THROWS_AS(SafetensorsFile::open(p), ModelError);
  CHECK_THROWS_WITH(SafetensorsFile::open(p), Catch::Contains("shape entry array"));
  fs::remove(p);
}

TEST_CASE("a plan with a very long rank number is refused, not a stack overflow", "[unit][fuzz][plan]") {
  // std::regex recursed once per digit.
  const std::string digits(200'000, '1');
  CHECK_THROWS_WITH(Plan::parse("0@r" + digits + ":cpu"), Catch::Contains("bad rank"));
  CHECK_THROWS_AS(Plan::parse("0@r" + digits + "cpu"), std::invalid_argument);
}

TEST_CASE("plans with extreme weights print back and resolve", "[unit][fuzz][plan]") {
  Gpt2Config cfg;  // 4 heads
  Plan p = Plan::parse("0-1@cpu*1e308+model*1e308");  // the sum of the weights was infinite: NaN shares
  p.resolve(cfg);
  CHECK(p.stages[0].devices[0].heads == 2);
  CHECK(p.stages[0].devices[1].heads == 2);
  CHECK(Plan::parse(p.str()).str() == p.str());  // "1e+308" split at its '+'
  CHECK_THROWS_WITH(Plan::parse("0-1@xdma:/dev/x*2*1"), Catch::Contains("more than one *WEIGHT"));
}
