// Fuzzes captured traces as `tessera replay` reads them (driver::replay, driver/src/trace.cpp):
// trace.json, its events and the data.bin blobs they point into, played on a small model device.
// A malformed or corrupted trace must be a UsageError; a trace whose descriptors make the engine
// fail is a DeviceError (exit 1).
//
// The input is trace.json, a NUL byte, a mode byte, then data.bin. With bit 0 of the mode byte
// set, the harness first rewrites every blob's crc32 (where it is an integer) to match its bytes,
// so that mutated addresses, sizes and offsets get past the CRC check to the code behind it.
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "fuzz_util.hpp"
#include "tessera/driver/device.hpp"
#include "tessera/driver/trace.hpp"

using namespace tessera;
using namespace tessera::driver;

namespace {

// trace.json with the crc32 of every load and check blob recomputed from `data`, or the text as it
// was where it is not JSON of that shape.
std::string fix_crcs(std::string_view text, std::span<const uint8_t> data) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("events") || !j["events"].is_array()) return std::string(text);
  for (auto& e : j["events"]) {
    if (!e.is_object()) continue;
    for (const char* kind : {"load", "check"}) {
      if (!e.contains(kind) || !e[kind].is_object()) continue;
      auto& b = e[kind];
      if (!b.contains("offset") || !b.contains("size") || !b.contains("crc32") || !b["offset"].is_number_unsigned() ||
          !b["size"].is_number_unsigned() || !b["crc32"].is_number_unsigned())
        continue;
      const uint64_t offset = b["offset"], size = b["size"];
      if (offset > data.size() || size > data.size() - offset) continue;
      b["crc32"] = static_cast<uint32_t>(
          ::crc32(::crc32(0L, Z_NULL, 0), data.data() + offset, static_cast<uInt>(size)));
    }
  }
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const fuzz::ScratchDir dir("replay");
  // 1 MiB of device memory: every GEMM a trace can name stays small enough to run quickly. The
  // engine has BF16, so BF16 descriptors run too.
  static const DeviceSpec spec = DeviceSpec::parse("model?preset=small-bf16&mem_mb=1");
  const uint8_t* nul = std::find(data, data + size, uint8_t{0});
  const std::string_view text(reinterpret_cast<const char*>(data), static_cast<size_t>(nul - data));
  if (nul + 1 >= data + size) {  // no data.bin
    dir.write("trace.json", {data, text.size()});
    dir.remove("data.bin");
  } else {
    const uint8_t mode = nul[1];
    const std::span<const uint8_t> blob(nul + 2, static_cast<size_t>(data + size - nul - 2));
    if (mode & 1) {
      const std::string fixed = fix_crcs(text, blob);
      dir.write("trace.json", {reinterpret_cast<const uint8_t*>(fixed.data()), fixed.size()});
    } else {
      dir.write("trace.json", {data, text.size()});
    }
    dir.write("data.bin", blob);
  }
  Device device(spec);
  try {
    const ReplayReport r = replay(dir.path().string(), device);
    if (r.bytes_wrong > r.bytes_checked) fuzz::broken("more bytes wrong than checked");
    if (r.ok() == r.first_mismatch.has_value()) fuzz::broken("a mismatch without a description, or the reverse");
  } catch (const UsageError&) {
    // a malformed trace: exit 2
  } catch (const DeviceError&) {
    // the engine refused a descriptor or the wait found it stuck: exit 1
  }
  return 0;
}
