// safetensors: half/bfloat16 conversions against hand-checked bit patterns, writer/reader round
// trips, files built byte by byte, and every kind of malformed file the reader must refuse.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tessera/io/safetensors.hpp"
#include "tessera/model/float_formats.hpp"

using namespace tessera;
using Catch::Matchers::Contains;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// A uniquely named file under the temporary directory, removed when it goes out of scope.
struct TempFile {
  fs::path path;
  TempFile() {
    static std::mt19937_64 rng{std::random_device{}()};
    path = fs::temp_directory_path() / fmt::format("tessera-st-{:016x}.safetensors", rng());
  }
  ~TempFile() {
    std::error_code ec;
    fs::remove(path, ec);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
};

std::vector<uint8_t> read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

void write_bytes(const fs::path& p, const std::vector<uint8_t>& bytes) {
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                           static_cast<std::streamsize>(bytes.size()));
}

uint64_t header_size_of(const std::vector<uint8_t>& bytes) {
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  return n;
}

// A file from a header text and data bytes, with the size field given or computed.
void write_raw(const fs::path& p, const std::string& header, const std::vector<uint8_t>& data,
               std::optional<uint64_t> size_field = std::nullopt) {
  const uint64_t n = size_field.value_or(header.size());
  std::vector<uint8_t> bytes(8);
  std::memcpy(bytes.data(), &n, 8);
  bytes.insert(bytes.end(), header.begin(), header.end());
  bytes.insert(bytes.end(), data.begin(), data.end());
  write_bytes(p, bytes);
}

// Two F32 tensors: "a" [2, 3] at [0, 24] and "b" [4] at [24, 40].
void write_good(const fs::path& p) {
  write_safetensors(p, {{"a", DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6}}, {"b", DType::kF32, {4}, {7, 8, 9, 10}}},
                    {{"format", "pt"}});
}

// Rewrites the header of the file at p with `edit`, keeping its data section.
void edit_header(const fs::path& p, const std::function<void(json&)>& edit) {
  const auto bytes = read_bytes(p);
  const uint64_t n = header_size_of(bytes);
  json header = json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  edit(header);
  write_raw(p, header.dump(), {bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n), bytes.end()});
}

// The message of the ModelError that f throws (any other exception fails the test).
template <typename F>
std::string model_error(F&& f) {
  try {
    f();
  } catch (const ModelError& e) {
    return e.what();
  }
  FAIL("no ModelError thrown");
  return {};
}

void require_model_error(const fs::path& p, const std::string& what) {
  REQUIRE_THAT(model_error([&] { SafetensorsFile::open(p); }), Contains(what) && Contains(p.string()));
}

bool is_half_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }

}  // namespace

TEST_CASE("half to float: hand-checked bit patterns", "[unit][safetensors]") {
  CHECK(half_to_float(0x3c00) == 1.0f);
  CHECK(half_to_float(0xc000) == -2.0f);
  CHECK(half_to_float(0x7bff) == 65504.0f);
  CHECK(half_to_float(0x0001) == std::ldexp(1.0f, -24));  // smallest subnormal
  CHECK(half_to_float(0x03ff) == std::ldexp(1023.0f, -24));  // largest subnormal
  CHECK(half_to_float(0x0400) == std::ldexp(1.0f, -14));  // smallest normal
  CHECK(half_to_float(0x3555) == 0.333251953125f);
  CHECK(half_to_float(0x7c00) == kInf);
  CHECK(half_to_float(0xfc00) == -kInf);
  CHECK(std::isnan(half_to_float(0x7e00)));
  CHECK(std::isnan(half_to_float(0x7c01)));  // signalling NaN, lowest payload bit
  CHECK(half_to_float(0x0000) == 0.0f);
  CHECK(std::signbit(half_to_float(0x8000)));
}

TEST_CASE("float to half: exact values and special cases", "[unit][safetensors]") {
  CHECK(float_to_half(1.0f) == 0x3c00);
  CHECK(float_to_half(-2.0f) == 0xc000);
  CHECK(float_to_half(65504.0f) == 0x7bff);
  CHECK(float_to_half(std::ldexp(1.0f, -24)) == 0x0001);
  CHECK(float_to_half(std::ldexp(1.0f, -14)) == 0x0400);
  CHECK(float_to_half(0.0f) == 0x0000);
  CHECK(float_to_half(-0.0f) == 0x8000);
  CHECK(float_to_half(kInf) == 0x7c00);
  CHECK(float_to_half(-kInf) == 0xfc00);
  CHECK(float_to_half(65536.0f) == 0x7c00);  // overflow, just past half's exponent range
  CHECK(float_to_half(100000.0f) == 0x7c00);
  CHECK(float_to_half(1e6f) == 0x7c00);
  CHECK(float_to_half(-1e6f) == 0xfc00);
  CHECK(is_half_nan(float_to_half(kNaN)));
  // A float NaN whose payload sits only in the low 13 bits must not become inf.
  CHECK(is_half_nan(float_to_half(std::bit_cast<float>(0x7f800001u))));
  CHECK(is_half_nan(float_to_half(std::bit_cast<float>(0xff800001u))));
  CHECK(float_to_half(std::numeric_limits<float>::denorm_min()) == 0x0000);  // far below half's range
  CHECK(float_to_half(-std::ldexp(1.0f, -30)) == 0x8000);
}

TEST_CASE("float to half: round to nearest even", "[unit][safetensors]") {
  const float ulp1 = std::ldexp(1.0f, -10);  // half's spacing just above 1
  CHECK(float_to_half(1.0f + ulp1 / 2) == 0x3c00);            // tie, 0x3c00 is even: down
  CHECK(float_to_half(1.0f + 3 * ulp1 / 2) == 0x3c02);        // tie, 0x3c01 is odd: up
  CHECK(float_to_half(1.0f + ulp1 / 2 + ulp1 / 1024) == 0x3c01);  // just above the tie: up
  CHECK(float_to_half(1.0f + ulp1 / 2 - ulp1 / 1024) == 0x3c00);  // just below: down
  CHECK(float_to_half(2.0f - ulp1 / 4) == 0x4000);            // rounds up across the exponent
  CHECK(float_to_half(65519.0f) == 0x7bff);                   // below the tie with 65536
  CHECK(float_to_half(65520.0f) == 0x7c00);                   // the tie rounds to even: inf
  // Subnormals, in units of 2^-24.
  const float unit = std::ldexp(1.0f, -24);
  CHECK(float_to_half(unit / 2) == 0x0000);                   // tie with 0: even
  CHECK(float_to_half(unit / 2 * 1.0001f) == 0x0001);
  CHECK(float_to_half(unit / 4) == 0x0000);
  CHECK(float_to_half(3 * unit / 2) == 0x0002);               // tie between 1 and 2: even
  CHECK(float_to_half(5 * unit / 2) == 0x0002);               // tie between 2 and 3: even
  CHECK(float_to_half(-5 * unit / 2) == 0x8002);
  CHECK(float_to_half(1023.5f * unit) == 0x0400);             // largest subnormal rounds up to normal
}

TEST_CASE("half and bf16: every bit pattern survives a round trip through float", "[unit][safetensors]") {
  for (uint32_t i = 0; i < 0x10000; ++i) {
    const auto h = static_cast<uint16_t>(i);
    if (is_half_nan(h)) {
      CHECK(std::isnan(half_to_float(h)));
      CHECK(is_half_nan(float_to_half(half_to_float(h))));
    } else if (float_to_half(half_to_float(h)) != h) {
      FAIL(fmt::format("half 0x{:04x} -> {} -> 0x{:04x}", h, half_to_float(h), float_to_half(half_to_float(h))));
    }
    const bool bf_nan = (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0;
    if (bf_nan) {
      CHECK(std::isnan(bf16_to_float(h)));
      CHECK(std::isnan(bf16_to_float(float_to_bf16(bf16_to_float(h)))));
    } else if (float_to_bf16(bf16_to_float(h)) != h) {
      FAIL(fmt::format("bf16 0x{:04x} does not round trip", h));
    }
  }
}

TEST_CASE("bf16: hand-checked bit patterns and rounding", "[unit][safetensors]") {
  CHECK(bf16_to_float(0x3f80) == 1.0f);
  CHECK(bf16_to_float(0xc000) == -2.0f);
  CHECK(bf16_to_float(0x7f80) == kInf);
  CHECK(bf16_to_float(0x0001) == std::ldexp(1.0f, -133));  // smallest subnormal
  CHECK(std::isnan(bf16_to_float(0x7fc0)));
  CHECK(float_to_bf16(1.0f) == 0x3f80);
  CHECK(float_to_bf16(-2.0f) == 0xc000);
  CHECK(float_to_bf16(-0.0f) == 0x8000);
  const float ulp1 = std::ldexp(1.0f, -7);  // bf16's spacing just above 1
  CHECK(float_to_bf16(1.0f + ulp1 / 2) == 0x3f80);      // tie, even: down
  CHECK(float_to_bf16(1.0f + 3 * ulp1 / 2) == 0x3f82);  // tie, odd: up
  CHECK(float_to_bf16(1.0f + ulp1 / 2 + ulp1 / 256) == 0x3f81);
  CHECK(float_to_bf16(65504.0f) == 0x4780);  // 65536: bf16 has 8 significant bits
  CHECK(float_to_bf16(std::numeric_limits<float>::max()) == 0x7f80);  // overflows to inf
  CHECK(float_to_bf16(std::bit_cast<float>(0x7f7f7fffu)) == 0x7f7f);
  CHECK(float_to_bf16(kInf) == 0x7f80);
  const uint16_t nan = float_to_bf16(std::bit_cast<float>(0x7f800001u));  // payload only in dropped bits
  CHECK(std::isnan(bf16_to_float(nan)));
}

TEST_CASE("safetensors: F32 F16 and BF16 round trips", "[unit][safetensors]") {
  const float sub = std::ldexp(1.0f, -24);  // a half subnormal
  const std::vector<float> values{0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, sub, kInf, -kInf, kNaN};
  const std::vector<uint64_t> shape{3, 3};
  TempFile f;
  write_safetensors(f.path,
                    {{"w32", DType::kF32, shape, values},
                     {"w16", DType::kF16, shape, values},
                     {"wbf", DType::kBF16, shape, values},
                     {"scalar", DType::kF32, {}, {42.5f}},
                     {"empty", DType::kF16, {0, 4}, {}},
                     {"empty2", DType::kBF16, {2, 0}, {}}},
                    {{"format", "pt"}, {"note", "tiny"}});
  const auto st = SafetensorsFile::open(f.path);
  CHECK(st.path() == f.path);
  CHECK(st.tensors().size() == 6);
  CHECK(st.metadata() == std::map<std::string, std::string>{{"format", "pt"}, {"note", "tiny"}});

  // F32 and F16 hold all of these exactly; BF16 rounds 65504 to 65536.
  for (const char* name : {"w32", "w16", "wbf"}) {
    INFO(name);
    const auto got = st.load_f32(name, shape);
    REQUIRE(got.size() == values.size());
    for (size_t i = 0; i + 1 < values.size(); ++i) {
      const float want = std::string(name) == "wbf" && values[i] == 65504.0f ? 65536.0f : values[i];
      CHECK(got[i] == want);
      CHECK(std::signbit(got[i]) == std::signbit(want));
    }
    CHECK(std::isnan(got.back()));
  }
  CHECK(st.info("w32").dtype == DType::kF32);
  CHECK(st.info("w16").dtype == DType::kF16);
  CHECK(st.info("wbf").dtype == DType::kBF16);
  CHECK(st.raw("w16").size() == 18);
  CHECK(st.raw("w32").size() == 36);

  CHECK(st.info("scalar").shape.empty());
  CHECK(st.info("scalar").elements() == 1);
  CHECK(st.load_f32("scalar", std::vector<uint64_t>{}) == std::vector<float>{42.5f});
  CHECK(st.info("empty").elements() == 0);
  CHECK(st.load_f32("empty", std::vector<uint64_t>{0, 4}).empty());
  CHECK(st.raw("empty2").empty());
}

TEST_CASE("safetensors: the writer's layout", "[unit][safetensors]") {
  TempFile f;
  // Given out of order: written in name order, contiguous.
  write_safetensors(f.path, {{"z", DType::kF16, {3}, {1, 2, 3}}, {"a", DType::kF32, {2}, {4, 5}},
                             {"m", DType::kBF16, {1}, {6}}});
  const auto bytes = read_bytes(f.path);
  const uint64_t n = header_size_of(bytes);
  CHECK(n % 8 == 0);
  CHECK(bytes[8] == '{');
  CHECK(bytes[8 + n - 1] != '\0');
  const auto st = SafetensorsFile::open(f.path);
  CHECK(st.info("a").begin == 0);
  CHECK(st.info("a").end == 8);
  CHECK(st.info("m").begin == 8);
  CHECK(st.info("m").end == 10);
  CHECK(st.info("z").begin == 10);
  CHECK(st.info("z").end == 16);
  CHECK(bytes.size() == 8 + n + 16);
  CHECK(st.metadata().empty());
  // Stored little-endian, as the format says: half 1.0 is 00 3c.
  CHECK(st.raw("z")[0] == 0x00);
  CHECK(st.raw("z")[1] == 0x3c);
}

TEST_CASE("safetensors: a file built byte by byte", "[unit][safetensors]") {
  TempFile f;
  // Unpadded header, keys in any order, metadata, an I8 tensor and an F64 tensor.
  const std::string header =
      R"({"h":{"shape":[2],"dtype":"F16","data_offsets":[0,4]},"__metadata__":{"k":"v"},)"
      R"("q":{"dtype":"I8","shape":[3],"data_offsets":[4,7]},"d":{"dtype":"F64","shape":[1],"data_offsets":[8,16]}})";
  std::vector<uint8_t> data{0x00, 0x3c, 0x00, 0xc0, 0x01, 0xff, 0x7f, 0x00};
  const double d = -0.75;
  data.resize(16);
  std::memcpy(data.data() + 8, &d, 8);
  write_raw(f.path, header, data);
  const auto st = SafetensorsFile::open(f.path);
  CHECK(st.load_f32("h") == std::vector<float>{1.0f, -2.0f});
  CHECK(st.load_f32("d") == std::vector<float>{-0.75f});
  CHECK(st.metadata().at("k") == "v");
  CHECK(st.contains("q"));
  CHECK_FALSE(st.contains("k"));
  CHECK(st.info("q").dtype == DType::kI8);
  CHECK(to_string(st.info("q").dtype) == "I8");
  CHECK(dtype_size(DType::kI8) == 1);
  const auto q = st.raw("q");
  CHECK(std::vector<uint8_t>(q.begin(), q.end()) == std::vector<uint8_t>{0x01, 0xff, 0x7f});
  REQUIRE_THAT(model_error([&] { st.load_f32("q"); }), Contains("'q'") && Contains("I8"));
}

TEST_CASE("safetensors: dtype names and sizes", "[unit][safetensors]") {
  CHECK(to_string(DType::kF32) == "F32");
  CHECK(to_string(DType::kBF16) == "BF16");
  CHECK(to_string(DType::kF8E4M3) == "F8_E4M3");
  CHECK(to_string(DType::kBool) == "BOOL");
  CHECK(dtype_size(DType::kF16) == 2);
  CHECK(dtype_size(DType::kF64) == 8);
  CHECK(dtype_size(DType::kF8E5M2) == 1);
  CHECK(dtype_size(DType::kC64) == 8);
}

TEST_CASE("safetensors: missing tensor and wrong expected shape", "[unit][safetensors]") {
  TempFile f;
  write_good(f.path);
  const auto st = SafetensorsFile::open(f.path);
  REQUIRE_THAT(model_error([&] { st.info("nope"); }), Contains("no tensor 'nope'") && Contains(f.path.string()));
  REQUIRE_THROWS_AS(st.load_f32("nope"), ModelError);
  REQUIRE_THROWS_AS(st.raw("nope"), ModelError);
  REQUIRE_THAT(model_error([&] { st.load_f32("a", std::vector<uint64_t>{3, 2}); }),
               Contains("'a'") && Contains("[2, 3]") && Contains("[3, 2]"));
  REQUIRE_THROWS_AS(st.load_f32("b", std::vector<uint64_t>{4, 1}), ModelError);
  CHECK(st.load_f32("a", std::vector<uint64_t>{2, 3}) == std::vector<float>{1, 2, 3, 4, 5, 6});
}

TEST_CASE("safetensors: bad sizes and truncation", "[unit][safetensors]") {
  TempFile f;
  SECTION("missing file") { require_model_error(f.path, "no such file"); }
  SECTION("empty file") {
    write_bytes(f.path, {});
    require_model_error(f.path, "too short");
  }
  SECTION("shorter than 8 bytes") {
    write_bytes(f.path, {1, 2, 3});
    require_model_error(f.path, "too short");
  }
  SECTION("absurd header size") {
    write_raw(f.path, "{}", {}, 200'000'000);
    require_model_error(f.path, "more than 100 MB");
  }
  SECTION("header size beyond the file") {
    write_raw(f.path, "{}", {}, 1000);
    require_model_error(f.path, "truncated");
  }
  SECTION("file cut inside the header") {
    write_good(f.path);
    auto bytes = read_bytes(f.path);
    bytes.resize(20);
    write_bytes(f.path, bytes);
    require_model_error(f.path, "truncated");
  }
  SECTION("file cut inside the data") {
    write_good(f.path);
    auto bytes = read_bytes(f.path);
    bytes.pop_back();
    write_bytes(f.path, bytes);
    require_model_error(f.path, "'b'");
    require_model_error(f.path, "beyond the end of the data section");
  }
}

TEST_CASE("safetensors: malformed headers", "[unit][safetensors]") {
  TempFile f;
  SECTION("not JSON") {
    write_raw(f.path, "{\"a\": [1, 2", {});
    require_model_error(f.path, "not valid JSON");
  }
  SECTION("not an object") {
    write_raw(f.path, "[1, 2]", {});
    require_model_error(f.path, "not a JSON object");
  }
  SECTION("invalid UTF-8") {
    write_raw(f.path, "{\"\xff\": 1}", {});
    require_model_error(f.path, "not valid JSON");
  }
  SECTION("duplicate tensor") {
    write_raw(f.path,
              R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
              {0, 0});
    require_model_error(f.path, "duplicate key 'a'");
  }
  SECTION("duplicate field") {
    write_raw(f.path, R"({"a":{"dtype":"U8","dtype":"I8","shape":[1],"data_offsets":[0,1]}})", {0});
    require_model_error(f.path, "duplicate key 'dtype'");
  }
  SECTION("entry not an object") {
    write_good(f.path);
    edit_header(f.path, [](json& h) { h["a"] = 3; });
    require_model_error(f.path, "tensor 'a': the entry is not an object");
  }
  SECTION("metadata not an object of strings") {
    write_good(f.path);
    edit_header(f.path, [](json& h) { h["__metadata__"]["n"] = 1; });
    require_model_error(f.path, "__metadata__ entry 'n' is not a string");
    edit_header(f.path, [](json& h) { h["__metadata__"] = "x"; });
    require_model_error(f.path, "__metadata__ is not an object");
  }
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    SECTION(fmt::format("missing {}", key)) {
      write_good(f.path);
      edit_header(f.path, [&](json& h) { h["b"].erase(key); });
      require_model_error(f.path, fmt::format("tensor 'b': missing '{}'", key));
    }
  }
  SECTION("wrong types") {
    write_good(f.path);
    edit_header(f.path, [](json& h) { h["a"]["dtype"] = 32; });
    require_model_error(f.path, "'dtype' is not a string");
    write_good(f.path);
    edit_header(f.path, [](json& h) { h["a"]["shape"] = "2x3"; });
    require_model_error(f.path, "'shape' is not an array");
    write_good(f.path);
    edit_header(f.path, [](json& h) { h["a"]["data_offsets"] = {0, 12, 24}; });
    require_model_error(f.path, "'data_offsets' is not [begin, end]");
    write_good(f.path);
    edit_header(f.path, [](json& h) { h["a"]["data_offsets"] = 24; });
    require_model_error(f.path, "'data_offsets' is not [begin, end]");
    write_good(f.path);
    edit_header(f.path, [](json& h) { h["a"]["data_offsets"] = {-1, 24}; });
    require_model_error(f.path, "data_offsets entry -1 is not a non-negative integer");
    write_good(f.path);
    edit_header(f.path, [](json& h) { h["a"]["data_offsets"] = {0, "24"}; });
    require_model_error(f.path, "not a non-negative integer");
  }
  SECTION("unknown dtype") {
    write_good(f.path);
    edit_header(f.path, [](json& h) { h["a"]["dtype"] = "F33"; });
    require_model_error(f.path, "dtype 'F33'");
    edit_header(f.path, [](json& h) { h["a"]["dtype"] = "f32"; });  // names are case-sensitive
    require_model_error(f.path, "dtype 'f32'");
  }
  SECTION("bad shape entries") {
    write_good(f.path);
    edit_header(f.path, [](json& h) { h["a"]["shape"] = {2, -3}; });
    require_model_error(f.path, "shape entry -3 is negative");
    edit_header(f.path, [](json& h) { h["a"]["shape"] = {2, 1.5}; });
    require_model_error(f.path, "shape entry 1.5 is not a non-negative integer");
    edit_header(f.path, [](json& h) { h["a"]["shape"] = {2, "3"}; });
    require_model_error(f.path, "shape entry \"3\" is not a non-negative integer");
  }
}

TEST_CASE("safetensors: headers that lie about offsets", "[unit][safetensors]") {
  TempFile f;
  write_good(f.path);  // a [2, 3] F32 at [0, 24], b [4] F32 at [24, 40]
  SECTION("begin after end") {
    edit_header(f.path, [](json& h) { h["a"]["data_offsets"] = {24, 0}; });
    require_model_error(f.path, "data_offsets [24, 0] begin after their end");
  }
  SECTION("end beyond the data section") {
    edit_header(f.path, [](json& h) { h["b"]["data_offsets"] = {24, 48}; });
    require_model_error(f.path, "beyond the end of the data section (40 bytes)");
  }
  SECTION("huge offsets") {
    edit_header(f.path, [](json& h) { h["b"]["data_offsets"] = {std::numeric_limits<uint64_t>::max() - 15,
                                                                   std::numeric_limits<uint64_t>::max()}; });
    require_model_error(f.path, "beyond the end of the data section");
  }
  SECTION("byte count does not match the shape") {
    edit_header(f.path, [](json& h) { h["a"]["shape"] = {2, 2}; });
    require_model_error(f.path, "tensor 'a': data_offsets [0, 24] hold 24 bytes but shape [2, 2] of F32 needs 16");
  }
  SECTION("byte count does not match the dtype") {
    edit_header(f.path, [](json& h) { h["a"]["dtype"] = "F16"; });
    require_model_error(f.path, "needs 12");
  }
  SECTION("overlapping tensors") {
    edit_header(f.path, [](json& h) {
      h["b"]["data_offsets"] = {16, 32};
    });
    require_model_error(f.path, "tensors 'a' [0, 24] and 'b' [16, 32] overlap");
  }
  SECTION("one tensor inside another") {
    edit_header(f.path, [](json& h) {
      h["a"]["shape"] = {10};
      h["a"]["data_offsets"] = {0, 40};
      h["b"]["data_offsets"] = {8, 24};
    });
    require_model_error(f.path, "overlap");
  }
  SECTION("the same bytes twice") {
    edit_header(f.path, [](json& h) {
      h["b"]["shape"] = {2, 3};
      h["b"]["data_offsets"] = {0, 24};
    });
    require_model_error(f.path, "overlap");
  }
  SECTION("element count overflow") {
    edit_header(f.path, [](json& h) { h["a"]["shape"] = {uint64_t{1} << 32, uint64_t{1} << 32}; });
    require_model_error(f.path, "too many elements");
  }
  SECTION("byte count overflow") {
    edit_header(f.path, [](json& h) { h["a"]["shape"] = {uint64_t{1} << 62}; });  // 2^64 bytes of F32
    require_model_error(f.path, "too many elements");
  }
  SECTION("a gap between tensors is allowed") {
    edit_header(f.path, [](json& h) {
      h["a"]["shape"] = {2};
      h["a"]["data_offsets"] = {0, 8};
    });
    CHECK(SafetensorsFile::open(f.path).load_f32("a") == std::vector<float>{1, 2});
  }
}

TEST_CASE("safetensors: writer errors", "[unit][safetensors]") {
  TempFile f;
  REQUIRE_THROWS_AS(write_safetensors(f.path, {{"a", DType::kF32, {2, 2}, {1, 2, 3}}}), std::invalid_argument);
  REQUIRE_THROWS_AS(write_safetensors(f.path, {{"a", DType::kI8, {1}, {1}}}), std::invalid_argument);
  REQUIRE_THROWS_AS(write_safetensors(f.path, {{"a", DType::kF32, {1}, {1}}, {"a", DType::kF16, {1}, {2}}}),
                    std::invalid_argument);
  REQUIRE_THROWS_AS(write_safetensors(f.path, {{"__metadata__", DType::kF32, {1}, {1}}}), std::invalid_argument);
  REQUIRE_THROWS_AS(write_safetensors(f.path / "no-such-dir" / "x.safetensors", {}), std::runtime_error);
  // No tensors at all is a valid file.
  write_safetensors(f.path, {});
  CHECK(SafetensorsFile::open(f.path).tensors().empty());
}
