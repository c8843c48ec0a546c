#include "tessera/io/safetensors.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "tessera/model/float_formats.hpp"

namespace tessera {

// Element loads memcpy the stored little-endian bytes straight into host values.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace {

using json = nlohmann::json;

// The reference implementation refuses larger headers: parsing a huge JSON is a denial of service.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct DTypeDesc {
  DType dtype;
  std::string_view name;
  size_t size;
};
constexpr std::array<DTypeDesc, 17> kDTypes{{
    {DType::kBool, "BOOL", 1},     {DType::kU8, "U8", 1},   {DType::kI8, "I8", 1},
    {DType::kF8E5M2, "F8_E5M2", 1}, {DType::kF8E4M3, "F8_E4M3", 1}, {DType::kF8E8M0, "F8_E8M0", 1},
    {DType::kI16, "I16", 2},       {DType::kU16, "U16", 2}, {DType::kF16, "F16", 2},
    {DType::kBF16, "BF16", 2},     {DType::kI32, "I32", 4}, {DType::kU32, "U32", 4},
    {DType::kF32, "F32", 4},       {DType::kC64, "C64", 8}, {DType::kF64, "F64", 8},
    {DType::kI64, "I64", 8},       {DType::kU64, "U64", 8},
}};

const DTypeDesc& desc(DType dtype) {
  for (const auto& d : kDTypes)
    if (d.dtype == dtype) return d;
  throw std::invalid_argument("invalid DType value");
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& d : kDTypes)
    if (d.name == name) return d.dtype;
  return std::nullopt;
}

std::string shape_str(const std::vector<uint64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

// The product of the dimensions, or nullopt if it does not fit in 64 bits.
std::optional<uint64_t> checked_elements(const std::vector<uint64_t>& shape) {
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  uint64_t n = 1;
  for (uint64_t d : shape) {
    if (n > std::numeric_limits<uint64_t>::max() / d) return std::nullopt;
    n *= d;
  }
  return n;
}

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Parses the header JSON, refusing duplicate keys (the format disallows them; nlohmann would keep
// one silently).
json parse_header(std::string_view text, const std::string& file) {
  std::vector<std::set<std::string>> keys;  // one set per open object
  auto check = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) keys.emplace_back();
    else if (event == json::parse_event_t::object_end) keys.pop_back();
    else if (event == json::parse_event_t::key && !keys.back().insert(parsed.get<std::string>()).second)
      throw ModelError(fmt::format("{}: duplicate key '{}' in the header", file, parsed.get<std::string>()));
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), check);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number like 1e400
    throw ModelError(fmt::format("{}: the header is not valid JSON: {}", file, e.what()));
  }
}

// A value for an error message: scalars as written, arrays and objects by their type (dumping a
// deeply nested one would recurse once per level and could overflow the stack).
std::string brief(const json& v) { return v.is_primitive() ? v.dump() : std::string(v.type_name()); }

uint64_t offset_value(const json& v, const std::string& where) {
  if (!v.is_number_unsigned())
    throw ModelError(fmt::format("{}: data_offsets entry {} is not a non-negative integer", where, brief(v)));
  return v.get<uint64_t>();
}

TensorInfo parse_entry(const std::string& name, const json& entry, uint64_t data_size, const std::string& file) {
  const std::string where = fmt::format("{}: tensor '{}'", file, name);
  if (!entry.is_object()) throw ModelError(fmt::format("{}: the entry is not an object", where));
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!entry.contains(key)) throw ModelError(fmt::format("{}: missing '{}'", where, key));

  TensorInfo t;
  t.name = name;
  const json& dtype = entry["dtype"];
  if (!dtype.is_string()) throw ModelError(fmt::format("{}: 'dtype' is not a string", where));
  const auto parsed = parse_dtype(dtype.get<std::string>());
  if (!parsed) throw ModelError(fmt::format("{}: unknown or unsupported dtype '{}'", where, dtype.get<std::string>()));
  t.dtype = *parsed;

  const json& shape = entry["shape"];
  if (!shape.is_array()) throw ModelError(fmt::format("{}: 'shape' is not an array", where));
  for (const json& d : shape) {
    if (d.is_number_integer() && !d.is_number_unsigned())
      throw ModelError(fmt::format("{}: shape entry {} is negative", where, brief(d)));
    if (!d.is_number_unsigned())
      throw ModelError(fmt::format("{}: shape entry {} is not a non-negative integer", where, brief(d)));
    t.shape.push_back(d.get<uint64_t>());
  }

  const json& offsets = entry["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2)
    throw ModelError(fmt::format("{}: 'data_offsets' is not [begin, end]", where));
  t.begin = offset_value(offsets[0], where);
  t.end = offset_value(offsets[1], where);
  if (t.begin > t.end)
    throw ModelError(fmt::format("{}: data_offsets [{}, {}] begin after their end", where, t.begin, t.end));
  if (t.end > data_size)
    throw ModelError(fmt::format("{}: data_offsets [{}, {}] go beyond the end of the data section ({} bytes): "
                                 "the file is truncated or its header is wrong",
                                 where, t.begin, t.end, data_size));

  const auto elements = checked_elements(t.shape);
  const uint64_t size = dtype_size(t.dtype);
  if (!elements || *elements > std::numeric_limits<uint64_t>::max() / size)
    throw ModelError(fmt::format("{}: shape {} has too many elements (overflows 64 bits)", where, shape_str(t.shape)));
  if (t.end - t.begin != *elements * size)
    throw ModelError(fmt::format("{}: data_offsets [{}, {}] hold {} bytes but shape {} of {} needs {}", where,
                                 t.begin, t.end, t.end - t.begin, shape_str(t.shape), to_string(t.dtype),
                                 *elements * size));
  return t;
}

}  // namespace

std::string_view to_string(DType dtype) { return desc(dtype).name; }
size_t dtype_size(DType dtype) { return desc(dtype).size; }

uint64_t TensorInfo::elements() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
  const std::string file = path.string();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw ModelError(fmt::format("{}: no such file (or not a regular file)", file));

  SafetensorsFile st;
  st.path_ = path;
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw ModelError(fmt::format("{}: cannot open: {}", file, std::strerror(errno)));
  st.bytes_.resize(static_cast<size_t>(in.tellg()));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(st.bytes_.data()), static_cast<std::streamsize>(st.bytes_.size()));
  if (!in) throw std::runtime_error(fmt::format("{}: read error", file));

  const uint64_t file_size = st.bytes_.size();
  if (file_size < 8)
    throw ModelError(fmt::format("{}: too short to be a safetensors file ({} bytes, less than the 8-byte header size)",
                                 file, file_size));
  const uint64_t header_size = load<uint64_t>(st.bytes_.data());
  if (header_size > kMaxHeaderBytes)
    throw ModelError(fmt::format("{}: header size {} is absurd (more than 100 MB): not a safetensors file?", file,
                                 header_size));
  if (header_size > file_size - 8)
    throw ModelError(fmt::format("{}: truncated: the header size is {} bytes but only {} bytes follow", file,
                                 header_size, file_size - 8));
  st.data_start_ = 8 + header_size;
  const uint64_t data_size = file_size - st.data_start_;

  const json header =
      parse_header({reinterpret_cast<const char*>(st.bytes_.data()) + 8, static_cast<size_t>(header_size)}, file);
  if (!header.is_object()) throw ModelError(fmt::format("{}: the header is not a JSON object", file));

  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) throw ModelError(fmt::format("{}: __metadata__ is not an object", file));
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string())
          throw ModelError(fmt::format("{}: __metadata__ entry '{}' is not a string", file, key));
        st.metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    st.tensors_[name] = parse_entry(name, entry, data_size, file);
  }

  // No two tensors may share a byte (empty tensors hold none). Sorted by begin, a tensor overlaps
  // an earlier one exactly when it starts before the furthest end seen so far.
  std::vector<const TensorInfo*> by_offset;
  for (const auto& [name, t] : st.tensors_)
    if (t.end > t.begin) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->begin < b->begin; });
  const TensorInfo* furthest = nullptr;
  for (const TensorInfo* t : by_offset) {
    if (furthest && t->begin < furthest->end)
      throw ModelError(fmt::format("{}: tensors '{}' [{}, {}] and '{}' [{}, {}] overlap", file, furthest->name,
                                   furthest->begin, furthest->end, t->name, t->begin, t->end));
    if (!furthest || t->end > furthest->end) furthest = t;
  }
  return st;
}

const TensorInfo& SafetensorsFile::info(const std::string& name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) throw ModelError(fmt::format("no tensor '{}' in {}", name, path_.string()));
  return it->second;
}

std::span<const uint8_t> SafetensorsFile::raw(const std::string& name) const {
  const TensorInfo& t = info(name);
  return {bytes_.data() + data_start_ + t.begin, static_cast<size_t>(t.end - t.begin)};
}

std::vector<float> SafetensorsFile::load_f32(const std::string& name,
                                             std::optional<std::vector<uint64_t>> shape) const {
  const TensorInfo& t = info(name);
  if (shape && *shape != t.shape)
    throw ModelError(fmt::format("{}: tensor '{}' has shape {} but {} was expected", path_.string(), name,
                                 shape_str(t.shape), shape_str(*shape)));
  const auto bytes = raw(name);
  const uint8_t* p = bytes.data();
  std::vector<float> out(t.elements());
  switch (t.dtype) {
    case DType::kF32:
      if (!out.empty()) std::memcpy(out.data(), p, bytes.size());
      break;
    case DType::kF16:
      for (size_t i = 0; i < out.size(); ++i) out[i] = half_to_float(load<uint16_t>(p + 2 * i));
      break;
    case DType::kBF16:
      for (size_t i = 0; i < out.size(); ++i) out[i] = bf16_to_float(load<uint16_t>(p + 2 * i));
      break;
    case DType::kF64:
      for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(load<double>(p + 8 * i));
      break;
    default:
      throw ModelError(fmt::format("{}: tensor '{}' has dtype {}; only F32, F16, BF16 and F64 convert to float32",
                                   path_.string(), name, to_string(t.dtype)));
  }
  return out;
}

void write_safetensors(const std::filesystem::path& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::map<std::string, const NamedTensor*> by_name;
  for (const NamedTensor& t : tensors) {
    if (t.dtype != DType::kF32 && t.dtype != DType::kF16 && t.dtype != DType::kBF16)
      throw std::invalid_argument(
          fmt::format("tensor '{}': cannot write dtype {} (F32, F16 or BF16 only)", t.name, to_string(t.dtype)));
    const auto elements = checked_elements(t.shape);
    if (!elements || *elements != t.values.size())
      throw std::invalid_argument(fmt::format("tensor '{}': {} values for shape {}", t.name, t.values.size(),
                                              shape_str(t.shape)));
    if (t.name == "__metadata__") throw std::invalid_argument("'__metadata__' is reserved, not a tensor name");
    if (!by_name.emplace(t.name, &t).second)
      throw std::invalid_argument(fmt::format("tensor '{}' given twice", t.name));
  }

  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<uint8_t> data;
  for (const auto& [name, t] : by_name) {
    const uint64_t begin = data.size();
    for (float v : t->values) {
      uint8_t b[4];
      size_t n = 2;
      if (t->dtype == DType::kF32) {
        std::memcpy(b, &v, 4);
        n = 4;
      } else {
        const uint16_t h = t->dtype == DType::kF16 ? float_to_half(v) : float_to_bf16(v);
        std::memcpy(b, &h, 2);
      }
      data.insert(data.end(), b, b + n);
    }
    header[name] = {{"dtype", to_string(t->dtype)}, {"shape", t->shape}, {"data_offsets", {begin, data.size()}}};
  }

  std::string text;
  try {
    text = header.dump();
  } catch (const json::type_error& e) {
    throw std::invalid_argument(fmt::format("a tensor name or metadata string is not valid UTF-8: {}", e.what()));
  }
  // Pad with spaces so the data section starts 8-byte aligned, as the reference writer does.
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t header_size = text.size();

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error(fmt::format("cannot write {}: {}", path.string(), std::strerror(errno)));
  out.write(reinterpret_cast<const char*>(&header_size), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  out.close();
  if (!out) throw std::runtime_error(fmt::format("error writing {}", path.string()));
}

}  // namespace tessera
