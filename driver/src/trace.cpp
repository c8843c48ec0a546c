#include "tessera/driver/trace.hpp"

#include <zlib.h>

#include <charconv>
#include <filesystem>
#include <vector>

#include <fmt/format.h>

#include "tessera/driver/device.hpp"

namespace tessera::driver {

namespace {

constexpr int kVersion = 1;

uint32_t crc(std::span<const uint8_t> bytes) {
  return static_cast<uint32_t>(::crc32(::crc32(0L, Z_NULL, 0), bytes.data(), static_cast<uInt>(bytes.size())));
}

std::string hex(std::span<const uint8_t> bytes) {
  std::string s;
  for (uint8_t b : bytes) s += fmt::format("{:02x}", b);
  return s;
}

std::string describe(const Descriptor& d) {
  return fmt::format("{} {}x{}x{} -> {} at {:#x} (tag {})", d.opcode == static_cast<uint8_t>(spec::Opcode::kGemm) ? "gemm" : "op",
                     d.m, d.n, d.k, d.int8_out() ? "int8" : "int32", d.c_addr, d.tag);
}

}  // namespace

TraceRecorder::TraceRecorder(const std::string& dir) : dir_(dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_empty(dir, ec))
    throw UsageError(fmt::format("capture directory {} is not empty", dir));
  fs::create_directories(dir, ec);
  data_.open(fs::path(dir) / "data.bin", std::ios::binary);
  if (ec || !data_) throw UsageError(fmt::format("cannot create a trace in {}", dir));
}

nlohmann::ordered_json TraceRecorder::blob(uint64_t addr, std::span<const uint8_t> bytes) {
  data_.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  nlohmann::ordered_json j = {{"addr", addr}, {"size", bytes.size()}, {"offset", offset_}, {"crc32", crc(bytes)}};
  offset_ += bytes.size();
  return j;
}

void TraceRecorder::load(uint64_t addr, std::span<const uint8_t> bytes) { events_.push_back({{"load", blob(addr, bytes)}}); }

void TraceRecorder::check(uint64_t addr, std::span<const uint8_t> bytes) {
  events_.push_back({{"check", blob(addr, bytes)}});
}

void TraceRecorder::submit(std::span<const Descriptor> descs) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const Descriptor& d : descs) list.push_back({{"what", describe(d)}, {"bytes", hex(encode(d))}});
  events_.push_back({{"submit", list}});
}

void TraceRecorder::wait(uint32_t fence, uint64_t busy_cycles) {
  events_.push_back({{"wait", {{"fence", fence}, {"busy_cycles", busy_cycles}}}});
}

void TraceRecorder::finish(const Device& device) {
  data_.flush();
  const Properties& p = device.properties();
  const nlohmann::ordered_json j = {
      {"format", "tessera-trace"},
      {"version", kVersion},
      {"captured_on", {{"spec", device.spec().str()}, {"array", {p.rows, p.cols}}, {"mem_bytes", p.mem_bytes}}},
      {"data_bytes", offset_},
      {"events", events_}};
  std::ofstream out(std::filesystem::path(dir_) / "trace.json");
  out << j.dump(1) << "\n";
  if (!out || !data_) throw UsageError(fmt::format("writing the trace in {} failed", dir_));
}

namespace {

// The GEMM output element a byte belongs to, searching the latest descriptors first.
std::string locate(uint64_t addr, const std::vector<Descriptor>& submitted) {
  for (size_t i = submitted.size(); i-- > 0;) {
    const Descriptor& d = submitted[i];
    if (d.opcode != static_cast<uint8_t>(spec::Opcode::kGemm) || addr < d.c_addr || d.ldc == 0) continue;
    const uint64_t row = (addr - d.c_addr) / d.ldc, col = (addr - d.c_addr) % d.ldc / d.out_bytes();
    if (row < d.m && col < d.n)
      return fmt::format("C[{}][{}] of descriptor {} of the trace ({})", row, col, i, describe(d));
  }
  return "no descriptor's output";
}

// A number in an event: a non-negative integer no larger than `max`, else a UsageError. (A float
// such as 1e300 must not reach an integer conversion.)
uint64_t number(const nlohmann::json& event, const char* key, uint64_t max, const std::string& where) {
  const nlohmann::json& v = event.at(key);
  if (!v.is_number_unsigned() || v.get<uint64_t>() > max)
    throw UsageError(fmt::format("{}: '{}' is {}, not an integer in [0, {}]", where, key,
                                 v.is_number() ? v.dump() : std::string(v.type_name()), max));
  return v.get<uint64_t>();
}

}  // namespace

ReplayReport replay(const std::string& dir, Device& device) {
  namespace fs = std::filesystem;
  nlohmann::json j;
  try {
    std::ifstream in(fs::path(dir) / "trace.json");
    if (!in) throw UsageError(fmt::format("{}: no trace.json", dir));
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(fmt::format("{}/trace.json: {}", dir, e.what()));
  }
  if (!j.is_object() || !j.contains("format") || j.at("format") != "tessera-trace" || !j.contains("version") ||
      j.at("version") != kVersion)
    throw UsageError(fmt::format("{}/trace.json is not a version {} Tessera trace", dir, kVersion));
  std::ifstream data_file(fs::path(dir) / "data.bin", std::ios::binary);
  const std::vector<uint8_t> data((std::istreambuf_iterator<char>(data_file)), std::istreambuf_iterator<char>());

  ReplayReport r;
  r.device = device.spec().str();
  std::vector<Descriptor> submitted;
  try {
    r.captured_on = j.at("captured_on").at("spec").get<std::string>();
    const uint32_t fence0 = device.submitted();
    const uint64_t busy0 = device.counters().busy_cycles;
    // A blob's bytes, checked against its CRC, and where they go.
    auto bytes_of = [&](const nlohmann::json& b, const char* what, size_t index) {
      const std::string where = fmt::format("{}: event {} ({})", dir, index, what);
      const uint64_t addr = number(b, "addr", UINT64_MAX, where), size = number(b, "size", UINT64_MAX, where),
                     offset = number(b, "offset", UINT64_MAX, where);
      if (offset > data.size() || size > data.size() - offset)
        throw UsageError(fmt::format("{}: event {} ({}) lies outside data.bin ({} bytes)", dir, index, what, data.size()));
      if (size > device.properties().mem_bytes || addr > device.properties().mem_bytes - size)
        throw UsageError(fmt::format("{}: event {} ({}) at [{:#x}, {:#x}) is beyond the memory of {} ({} bytes)", dir,
                                     index, what, addr, addr + size, r.device, device.properties().mem_bytes));
      const std::span<const uint8_t> span(data.data() + offset, size);
      if (crc(span) != number(b, "crc32", UINT32_MAX, where))
        throw UsageError(fmt::format("{}: event {} ({}) fails its CRC-32: the trace is corrupted", dir, index, what));
      return std::pair{addr, span};
    };
    const auto& events = j.at("events");
    for (size_t i = 0; i < events.size(); ++i) {
      const auto& e = events[i];
      if (e.contains("load")) {
        const auto [addr, bytes] = bytes_of(e["load"], "load", i);
        device.backend().mem_write(addr, bytes);
        ++r.loads;
      } else if (e.contains("submit")) {
        std::vector<Descriptor> descs;
        for (const auto& d : e["submit"]) {
          const std::string h = d.at("bytes");
          if (h.size() != 2 * spec::kDescBytes)
            throw UsageError(fmt::format("{}: event {}: a descriptor of {} hex digits", dir, i, h.size()));
          DescriptorBytes raw{};
          for (size_t b = 0; b < raw.size(); ++b) {
            const char* digits = h.data() + 2 * b;
            if (std::from_chars(digits, digits + 2, raw[b], 16).ptr != digits + 2)
              throw UsageError(fmt::format("{}: event {}: descriptor bytes '{}' are not hex", dir, i, h));
          }
          descs.push_back(decode(raw));
          if (descs.back().bf16() && !device.properties().bf16)
            throw UsageError(fmt::format("{}: event {} submits a BF16 GEMM, and {} has no BF16 (an int8-only "
                                         "preset): replay it on a preset with BF16 (small-bf16, default-bf16, "
                                         "large-bf16)",
                                         dir, i, r.device));
        }
        device.submit(descs, BoundsCheck::kOff);  // the addresses are the recorded ones, not this device's buffers
        submitted.insert(submitted.end(), descs.begin(), descs.end());
        r.descriptors += descs.size();
      } else if (e.contains("wait")) {
        const std::string where = fmt::format("{}: event {} (wait)", dir, i);
        device.wait(fence0 + static_cast<uint32_t>(number(e["wait"], "fence", UINT32_MAX, where)));
        r.recorded_cycles = number(e["wait"], "busy_cycles", UINT64_MAX, where);
        r.replayed_cycles = device.counters().busy_cycles - busy0;
        ++r.waits;
      } else if (e.contains("check")) {
        const auto [addr, want] = bytes_of(e["check"], "check", i);
        std::vector<uint8_t> got(want.size());
        device.backend().mem_read(addr, got);
        for (size_t b = 0; b < got.size(); ++b) {
          if (got[b] == want[b]) continue;
          if (!r.first_mismatch)
            r.first_mismatch = fmt::format("event {} (check of [{:#x}, {:#x})): byte {:#x} is {:#04x}, expected {:#04x}; "
                                           "it belongs to {}",
                                           i, addr, addr + got.size(), addr + b, got[b], want[b], locate(addr + b, submitted));
          ++r.bytes_wrong;
        }
        r.bytes_checked += got.size();
        ++r.checks;
      } else {
        throw UsageError(fmt::format("{}: event {} is none of load, submit, wait, check", dir, i));
      }
    }
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(fmt::format("{}/trace.json: {}", dir, e.what()));
  }
  return r;
}

}  // namespace tessera::driver
