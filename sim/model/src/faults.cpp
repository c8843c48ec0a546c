#include "tessera/model/faults.hpp"
#include "tessera/model/parse.hpp"

#include <charconv>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

namespace tessera {

namespace {

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  for (size_t pos = 0;;) {
    const size_t next = s.find(sep, pos);
    out.push_back(s.substr(pos, next - pos));
    if (next == std::string_view::npos) return out;
    pos = next + 1;
  }
}

uint64_t integer(std::string_view text, std::string_view what, uint64_t max) {
  if (const auto v = parse_uint(text, 0, max)) return *v;
  throw std::invalid_argument(fmt::format("{} '{}' is not an integer in [0, {}]", what, text, max));
}

constexpr const char* kUsage = "stuck:ROW,COL,BIT[,0|1], flip:RATE, slverr:ADDR or hang";

}  // namespace

FaultConfig FaultConfig::parse(std::string_view text) {
  FaultConfig f;
  const size_t colon = text.find(':');
  const std::string_view kind = text.substr(0, colon);
  const std::string_view arg = colon == std::string_view::npos ? std::string_view{} : text.substr(colon + 1);
  if (kind == "hang" && colon == std::string_view::npos) {
    f.kind = Kind::kHang;
  } else if (kind == "stuck") {
    const auto parts = split(arg, ',');
    if (parts.size() != 3 && parts.size() != 4)
      throw std::invalid_argument(fmt::format("fault '{}': expected stuck:ROW,COL,BIT[,0|1]", text));
    f.kind = Kind::kStuck;
    f.row = static_cast<uint32_t>(integer(parts[0], "PE row", 255));
    f.col = static_cast<uint32_t>(integer(parts[1], "PE column", 255));
    f.bit = static_cast<uint32_t>(integer(parts[2], "accumulator bit", 31));
    if (parts.size() == 4) f.value = integer(parts[3], "stuck value", 1) != 0;
  } else if (kind == "flip") {
    double rate = 0;
    const auto r = std::from_chars(arg.data(), arg.data() + arg.size(), rate);
    if (arg.empty() || r.ec != std::errc() || r.ptr != arg.data() + arg.size() || !(rate > 0 && rate <= 0.5))
      throw std::invalid_argument(fmt::format("fault '{}': the flip rate must be a number in (0, 0.5]", text));
    f.kind = Kind::kFlip;
    f.rate = rate;
  } else if (kind == "slverr") {
    f.kind = Kind::kSlverr;
    f.addr = integer(arg, "address", UINT64_MAX);
  } else {
    throw std::invalid_argument(fmt::format("unknown fault '{}' (faults: {})", text, kUsage));
  }
  return f;
}

std::string FaultConfig::str() const {
  switch (kind) {
    case Kind::kNone: return "none";
    case Kind::kStuck: return fmt::format("stuck:{},{},{},{}", row, col, bit, value ? 1 : 0);
    case Kind::kFlip: return fmt::format("flip:{}", rate);
    case Kind::kSlverr: return fmt::format("slverr:{:#x}", addr);
    case Kind::kHang: return "hang";
  }
  return "?";
}

}  // namespace tessera
