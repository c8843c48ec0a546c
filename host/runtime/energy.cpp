#include "tessera/runtime/energy.hpp"

#include <array>
#include <filesystem>
#include <fstream>
#include <set>
#include <span>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "tessera/driver/device.hpp"
#include "tessera/model/golden.hpp"

namespace tessera {

namespace {

constexpr std::pair<std::string_view, std::string_view> kTables[] = {
#include "energy_tables.inc"
};

constexpr std::string_view kFmax =
#include "fmax.inc"
    ;

using Member = Sourced EnergyTable::*;
constexpr std::array<std::pair<std::string_view, Member>, 6> kEnergies = {{
    {"mac_int8", &EnergyTable::mac_int8},
    {"spad_read_byte", &EnergyTable::spad_read_byte},
    {"spad_write_byte", &EnergyTable::spad_write_byte},
    {"dram_byte", &EnergyTable::dram_byte},
    {"epilogue_add", &EnergyTable::epilogue_add},
    {"epilogue_requant", &EnergyTable::epilogue_requant},
}};
constexpr std::array<std::pair<std::string_view, Member>, 2> kAreas = {{
    {"mac_int8", &EnergyTable::mac_int8_area},
    {"sram_bit", &EnergyTable::sram_bit_area},
}};
// BF16's entries: optional in a table file (tables written before BF16 existed stay valid).
constexpr std::array<std::pair<std::string_view, Member>, 2> kBf16Energies = {{
    {"mac_bf16", &EnergyTable::mac_bf16},
    {"epilogue_add_fp32", &EnergyTable::epilogue_add_fp32},
}};
constexpr std::array<std::pair<std::string_view, Member>, 1> kBf16Areas = {{
    {"mac_bf16", &EnergyTable::mac_bf16_area},
}};
constexpr std::array<std::pair<std::string_view, Member>, 2> kScalars = {{
    {"sram_overhead", &EnergyTable::sram_overhead},
    {"static_mw_per_mm2", &EnergyTable::static_mw_per_mm2},
}};

[[noreturn]] void bad(std::string_view origin, const std::string& what) {
  throw std::invalid_argument(fmt::format("energy table {}: {}", origin, what));
}

Sourced sourced(const nlohmann::json& j, std::string_view origin, std::string_view key) {
  if (!j.is_object() || !j.contains("value") || !j["value"].is_number() || !j.contains("source") ||
      !j["source"].is_string() || j.size() != 2)
    bad(origin, fmt::format("'{}' must be {{\"value\": number, \"source\": text}}", key));
  Sourced s{j["value"].get<double>(), j["source"].get<std::string>()};
  if (!(s.value >= 0) || s.source.empty()) bad(origin, fmt::format("'{}' needs a value >= 0 and a source", key));
  return s;
}

// Reads the entries of `section` named in `members` or `optional` into `t`; with `all`, every one
// of `members` must be there.
template <size_t N, size_t M>
void read_section(EnergyTable& t, const nlohmann::json& j, std::string_view origin, std::string_view section,
                  const std::array<std::pair<std::string_view, Member>, N>& members,
                  const std::array<std::pair<std::string_view, Member>, M>& optional, bool all) {
  if (!j.contains(section)) {
    if (all) bad(origin, fmt::format("'{}' is missing", section));
    return;
  }
  if (!j[section].is_object()) bad(origin, fmt::format("'{}' must be an object", section));
  for (const auto& [key, value] : j[section].items()) {
    bool known = false;
    using Entries = std::span<const std::pair<std::string_view, Member>>;
    for (const Entries list : {Entries(members), Entries(optional)})
      for (const auto& [name, member] : list)
        if (key == name) t.*member = sourced(value, origin, fmt::format("{}.{}", section, key)), known = true;
    if (!known) bad(origin, fmt::format("unknown entry '{}.{}'", section, key));
  }
  if (all)
    for (const auto& [name, member] : members)
      if (!j[section].contains(name)) bad(origin, fmt::format("'{}.{}' is missing", section, name));
}

template <size_t N>
void read_scalars(EnergyTable& t, const nlohmann::json& j, std::string_view origin,
                  const std::array<std::pair<std::string_view, Member>, N>& members, bool all) {
  for (const auto& [name, member] : members) {
    if (j.contains(name))
      t.*member = sourced(j[name], origin, name);
    else if (all)
      bad(origin, fmt::format("'{}' is missing", name));
  }
}

}  // namespace

std::vector<std::string> EnergyTable::builtin_names() {
  std::vector<std::string> names;
  for (const auto& [name, text] : kTables) names.emplace_back(name);
  return names;
}

EnergyTable EnergyTable::load(std::string_view name_or_file) {
  for (const auto& [name, text] : kTables)
    if (name == name_or_file) return from_json(nlohmann::json::parse(text), name);
  const std::string path(name_or_file);
  std::ifstream in(path);
  if (!in || std::filesystem::is_directory(path)) {
    std::string names;
    for (const auto& n : builtin_names()) names += (names.empty() ? "" : ", ") + n;
    throw std::invalid_argument(
        fmt::format("energy table '{}' is neither a shipped one ({}) nor a readable file", path, names));
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    bad(path, fmt::format("not JSON: {}", e.what()));
  }
  return from_json(j, path);
}

EnergyTable EnergyTable::from_json(const nlohmann::json& j, std::string_view origin) {
  if (!j.is_object()) bad(origin, "must be a JSON object");
  static const std::set<std::string> keys = {"name",     "node_nm",       "description", "derived_from", "scale",
                                             "energy_pj", "area_um2",     "sram_overhead", "static_mw_per_mm2"};
  for (const auto& [key, value] : j.items())
    if (!keys.count(key)) bad(origin, fmt::format("unknown entry '{}'", key));
  for (const char* key : {"name", "description"})
    if (!j.contains(key) || !j[key].is_string()) bad(origin, fmt::format("'{}' must be text", key));
  if (!j.contains("node_nm") || !j["node_nm"].is_number() || !(j["node_nm"].get<double>() > 0))
    bad(origin, "'node_nm' must be a number > 0");

  EnergyTable t;
  const bool derived = j.contains("derived_from");
  if (derived) {
    // A shipped table scaled to this node: energies (device memory aside, which is another chip)
    // and areas by the factors in "scale"; then this table's own entries, as they are.
    if (!j["derived_from"].is_string()) bad(origin, "'derived_from' must name a shipped table");
    const std::string base = j["derived_from"];
    bool shipped = false;
    for (const auto& [name, text] : kTables) shipped |= name == base;
    if (!shipped) bad(origin, fmt::format("'derived_from' must name a shipped table, not '{}'", base));
    t = load(base);
    const auto& s = j.contains("scale") ? j["scale"] : nlohmann::json();
    if (!s.is_object() || s.size() != 3 || !s.contains("energy") || !s["energy"].is_number() ||
        !s.contains("area") || !s["area"].is_number() || !s.contains("source") || !s["source"].is_string())
      bad(origin, "a derived table needs 'scale': {\"energy\": factor, \"area\": factor, \"source\": text}");
    const double energy = s["energy"], area = s["area"];
    if (!(energy > 0) || !(area > 0)) bad(origin, "'scale' factors must be > 0");
    const std::string why = s["source"];
    auto scale = [&](Sourced& x, double f) {
      x.value *= f;
      x.source = fmt::format("{}; scaled x{} to {} nm ({})", x.source, f, j["node_nm"].get<double>(), why);
    };
    for (const auto& [name, member] : kEnergies)
      if (name != "dram_byte") scale(t.*member, energy);
    for (const auto& [name, member] : kAreas) scale(t.*member, area);
    for (const auto& [name, member] : kBf16Energies) scale(t.*member, energy);
    for (const auto& [name, member] : kBf16Areas) scale(t.*member, area);
  } else if (j.contains("scale")) {
    bad(origin, "'scale' goes with 'derived_from'");
  }
  t.name = j["name"];
  t.description = j["description"];
  t.node_nm = j["node_nm"];
  read_section(t, j, origin, "energy_pj", kEnergies, kBf16Energies, !derived);
  read_section(t, j, origin, "area_um2", kAreas, kBf16Areas, !derived);
  read_scalars(t, j, origin, kScalars, !derived);
  return t;
}

nlohmann::ordered_json EnergyTable::to_json() const {
  auto entries = [this](const auto& members, nlohmann::ordered_json o = {}) {
    for (const auto& [name, member] : members)
      if (!(this->*member).source.empty())
        o[std::string(name)] = {{"value", (this->*member).value}, {"source", (this->*member).source}};
    return o;
  };
  nlohmann::ordered_json j = {{"name", name}, {"node_nm", node_nm}, {"description", description},
                              {"energy_pj", entries(kBf16Energies, entries(kEnergies))},
                              {"area_um2", entries(kBf16Areas, entries(kAreas))}};
  const nlohmann::ordered_json scalars = entries(kScalars);
  for (const auto& [key, value] : scalars.items()) j[key] = value;
  return j;
}

EngineActivity& EngineActivity::operator+=(const EngineActivity& o) {
  macs += o.macs, bf16_macs += o.bf16_macs, fp32_adds += o.fp32_adds;
  spad_read_bytes += o.spad_read_bytes, spad_write_bytes += o.spad_write_bytes;
  dram_bytes += o.dram_bytes, epilogue_adds += o.epilogue_adds, epilogue_requants += o.epilogue_requants;
  cycles += o.cycles;
  return *this;
}

EngineActivity EngineActivity::operator-(const EngineActivity& o) const {
  return {macs - o.macs,
          bf16_macs - o.bf16_macs,
          fp32_adds - o.fp32_adds,
          spad_read_bytes - o.spad_read_bytes,
          spad_write_bytes - o.spad_write_bytes,
          dram_bytes - o.dram_bytes,
          epilogue_adds - o.epilogue_adds,
          epilogue_requants - o.epilogue_requants,
          cycles - o.cycles};
}

EngineActivity activity_of(const driver::Counters& delta, const std::vector<Descriptor>& descs,
                           const EngineConfig& cfg) {
  const uint64_t array = uint64_t{cfg.rows} * cfg.cols, descriptor_bytes = 64 * delta.descs;
  EngineActivity a;
  a.macs = delta.steps * array;
  a.spad_read_bytes = delta.spad_read_bytes;
  a.spad_write_bytes = delta.read_bytes > descriptor_bytes ? delta.read_bytes - descriptor_bytes : 0;
  a.dram_bytes = delta.read_bytes + delta.write_bytes;
  a.cycles = delta.busy_cycles;
  for (const Descriptor& d : descs) {
    // Every tile reads all R rows of its C (2 x C/2 with FOLD) sums out through the epilogue.
    const ActionCounts counts = count_actions(d, cfg);
    const uint64_t elements = counts.tiles * array;
    const uint64_t adds = elements * (d.has(spec::desc::FLAG_ACCUMULATE) + d.has(spec::desc::FLAG_BIAS));
    if (d.bf16()) {
      a.bf16_macs += counts.steps * array;
      a.fp32_adds += adds;
    } else {
      a.epilogue_adds += adds;
    }
    if (d.int8_out()) a.epilogue_requants += elements;
  }
  return a;
}

uint64_t scratchpad_bytes(const EngineConfig& cfg) {
  const uint64_t r = cfg.rows, c = cfg.cols;
  // A (R banks) and B (C banks) of two slots of k_max bytes, C_in (2 slots of R rows of C int32),
  // the epilogue's tables (2 slots of C int32 biases, C int32 multipliers and C shifts).
  return 2 * cfg.k_max * (r + c) + 2 * r * c * 4 + 2 * c * 9;
}

AsicArea asic_area(const EngineConfig& cfg, const EnergyTable& t) {
  AsicArea a;
  a.macs = uint64_t{cfg.rows} * cfg.cols;
  a.sram_bytes = scratchpad_bytes(cfg);
  if (cfg.bf16 && t.mac_bf16_area.source.empty())
    throw std::invalid_argument(fmt::format("energy table {} has no area_um2.mac_bf16: it cannot size a BF16 engine",
                                            t.name));
  a.array_mm2 = double(a.macs) * (t.mac_int8_area.value + (cfg.bf16 ? t.mac_bf16_area.value : 0)) * 1e-6;
  a.sram_mm2 = double(a.sram_bytes) * 8 * t.sram_bit_area.value * t.sram_overhead.value * 1e-6;
  return a;
}

std::optional<FmaxEstimate> estimated_fmax(std::string_view preset) {
  static const nlohmann::json table = nlohmann::json::parse(kFmax);
  const auto it = table.find(preset);
  if (it == table.end()) return std::nullopt;
  return FmaxEstimate{(*it)["fmax_mhz"], (*it)["logic_fmax_mhz"], (*it)["limited_by"]};
}

std::optional<FmaxEstimate> estimated_fmax(const driver::DeviceSpec& spec) {
  if (spec.kind == "xdma") return std::nullopt;
  return estimated_fmax(spec.preset());
}

AcceleratorClock accelerator_clock(const driver::DeviceSpec& spec) {
  if (const auto f = estimated_fmax(spec))
    return {f->mhz, fmt::format("estimated: the {} preset's Fmax on Artix-7 ({}; static timing of the logic, without "
                                "routing: scripts/synth --fmax)",
                                spec.preset(), f->limited_by)};
  return {250, spec.kind == "xdma" ? fmt::format("assumed: give {}'s clock with --clock-mhz", spec.str())
                                   : fmt::format("assumed: the {} preset has no Fmax estimate", spec.preset())};
}

EnergySplit accel_energy(const EngineActivity& a, const EnergyTable& t, const AsicArea& area, double clock_hz) {
  constexpr double pj = 1e-12;
  EnergySplit e;
  if (a.bf16_macs && (t.mac_bf16.source.empty() || t.epilogue_add_fp32.source.empty()))
    throw std::invalid_argument(fmt::format("energy table {} has no energy_pj.mac_bf16 and epilogue_add_fp32: it "
                                            "cannot price BF16 work", t.name));
  e.compute = pj * (double(a.macs - a.bf16_macs) * t.mac_int8.value + double(a.bf16_macs) * t.mac_bf16.value +
                    double(a.epilogue_adds) * t.epilogue_add.value + double(a.fp32_adds) * t.epilogue_add_fp32.value +
                    double(a.epilogue_requants) * t.epilogue_requant.value);
  e.onchip = pj * (double(a.spad_read_bytes) * t.spad_read_byte.value +
                   double(a.spad_write_bytes) * t.spad_write_byte.value);
  e.dram = pj * double(a.dram_bytes) * t.dram_byte.value;
  e.leakage = t.static_mw_per_mm2.value * 1e-3 * area.total_mm2() * double(a.cycles) / clock_hz;
  return e;
}

}  // namespace tessera
