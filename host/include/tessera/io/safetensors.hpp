// Reads and writes safetensors files (the Hugging Face checkpoint format): an 8-byte little-endian
// header size N, N bytes of JSON naming each tensor's dtype, shape and byte range, then the data.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

// A model file that is malformed, truncated or inconsistent: bad input (the CLI exits 2).
class ModelError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// The whole-byte element types of the format. (The sub-byte F4/F6 types are rejected on open.)
enum class DType {
  kBool, kU8, kI8, kF8E5M2, kF8E4M3, kF8E8M0, kI16, kU16, kF16, kBF16,
  kI32, kU32, kF32, kC64, kF64, kI64, kU64,
};
std::string_view to_string(DType dtype);  // as the format spells it: "F32", "BF16", "F8_E4M3", ...
size_t dtype_size(DType dtype);            // bytes per element

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<uint64_t> shape;
  uint64_t begin = 0, end = 0;  // byte offsets in the data section
  uint64_t elements() const;
};

class SafetensorsFile {
 public:
  // Reads and validates the whole file; throws ModelError naming the file and the problem.
  static SafetensorsFile open(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return path_; }
  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }  // "__metadata__"
  bool contains(const std::string& name) const { return tensors_.contains(name); }
  const TensorInfo& info(const std::string& name) const;  // ModelError if there is no such tensor

  // The tensor converted to float32 (from F32, F16, BF16 or F64). `shape`, when given, must equal
  // the tensor's shape exactly. Throws ModelError on a shape mismatch or another dtype.
  std::vector<float> load_f32(const std::string& name,
                              std::optional<std::vector<uint64_t>> shape = std::nullopt) const;
  std::span<const uint8_t> raw(const std::string& name) const;  // the bytes as stored

 private:
  SafetensorsFile() = default;

  std::filesystem::path path_;
  std::vector<uint8_t> bytes_;  // the whole file
  size_t data_start_ = 0;       // 8 + header size
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

struct NamedTensor {
  std::string name;
  DType dtype = DType::kF32;  // F32, F16 or BF16 for write_safetensors
  std::vector<uint64_t> shape;
  std::vector<float> values;  // converted on write (round to nearest even for F16/BF16)
};

// Writes a valid file: the header padded with spaces to a multiple of 8, the tensors in name order
// and contiguous. Throws std::runtime_error on I/O errors, std::invalid_argument on a values/shape
// size mismatch, an unsupported dtype or a duplicate or reserved name.
void write_safetensors(const std::filesystem::path& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace tessera
