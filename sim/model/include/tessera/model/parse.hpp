// Parsing of the numbers in device options and fault specs.
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tessera {

// An unsigned integer, decimal or 0x-prefixed hex, that is all of `text` and lies in [lo, hi].
inline std::optional<uint64_t> parse_uint(std::string_view text, uint64_t lo = 0, uint64_t hi = UINT64_MAX) {
  int base = 10;
  if (text.starts_with("0x")) {
    base = 16;
    text.remove_prefix(2);
  }
  uint64_t v = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), v, base);
  if (text.empty() || r.ec != std::errc() || r.ptr != text.data() + text.size() || v < lo || v > hi) return std::nullopt;
  return v;
}

}  // namespace tessera
