#include "tessera/io/npy.hpp"

#include <fstream>
#include <stdexcept>

#include <fmt/format.h>

namespace tessera {

void write_npy(const std::string& path, const std::string& dtype, const std::vector<uint64_t>& shape,
               std::span<const uint8_t> data) {
  std::string dims;
  for (uint64_t d : shape) dims += fmt::format("{}, ", d);
  if (shape.size() > 1) dims.resize(dims.size() - 2);
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", dtype, dims);
  // magic (6) + version (2) + header length (2) + header, padded with spaces to a multiple of 64,
  // ending in a newline.
  const size_t total = (10 + header.size() + 1 + 63) / 64 * 64;
  header.append(total - 10 - header.size() - 1, ' ');
  header.push_back('\n');
  std::ofstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error(fmt::format("cannot write {}", path));
  const uint16_t len = static_cast<uint16_t>(header.size());
  f.write("\x93NUMPY\x01\x00", 8);
  f.write(reinterpret_cast<const char*>(&len), 2);
  f.write(header.data(), static_cast<std::streamsize>(header.size()));
  f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  if (!f) throw std::runtime_error(fmt::format("error writing {}", path));
}

namespace {
template <typename T>
constexpr const char* dtype_of() {
  if constexpr (std::is_same_v<T, int8_t>) return "|i1";
  else if constexpr (std::is_same_v<T, int32_t>) return "<i4";
  else if constexpr (std::is_same_v<T, uint16_t>) return "<u2";
  else if constexpr (std::is_same_v<T, float>) return "<f4";
  else static_assert(sizeof(T) == 0, "unsupported dtype");
}
}  // namespace

template <typename T>
void write_npy(const std::string& path, const std::vector<uint64_t>& shape, std::span<const T> data) {
  write_npy(path, dtype_of<T>(), shape,
            std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data.data()), data.size_bytes()));
}

template void write_npy<int8_t>(const std::string&, const std::vector<uint64_t>&, std::span<const int8_t>);
template void write_npy<uint16_t>(const std::string&, const std::vector<uint64_t>&, std::span<const uint16_t>);
template void write_npy<int32_t>(const std::string&, const std::vector<uint64_t>&, std::span<const int32_t>);
template void write_npy<float>(const std::string&, const std::vector<uint64_t>&, std::span<const float>);

}  // namespace tessera
