#include "tessera/runtime/plan.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <regex>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "tessera/backends/gpu_projection.hpp"
#include "tessera/driver/device.hpp"
#include "tessera/model/parse.hpp"

namespace tessera {

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t pos = 0;
  for (;;) {
    const size_t next = s.find(sep, pos);
    out.push_back(s.substr(pos, next - pos));
    if (next == std::string::npos) return out;
    pos = next + 1;
  }
}

uint32_t layer_number(const std::string& text, const std::string& plan) {
  if (const auto v = parse_uint(text, 0, UINT32_MAX)) return static_cast<uint32_t>(*v);
  throw std::invalid_argument(fmt::format("plan '{}': '{}' is not a layer number", plan, text));
}

// *hH/cC[/vV]: a device's heads, MLP columns and output rows, each at least 1.
void parse_shares(const std::string& text, PlanDevice& d, const std::string& plan) {
  const auto parts = split(text, '/');
  const std::string form = "*hHEADS/cCOLUMNS[/vROWS]";
  bool ok = parts.size() == 2 || parts.size() == 3;
  for (size_t i = 0; ok && i < parts.size(); ++i) {
    const auto v = parts[i].size() > 1 && parts[i][0] == "hcv"[i] ? parse_uint(parts[i].substr(1), 1, UINT32_MAX)
                                                                   : std::nullopt;
    ok = v.has_value();
    if (ok) (i == 0 ? d.heads : i == 1 ? d.mlp : d.vocab) = static_cast<uint32_t>(*v);
  }
  if (!ok)
    throw std::invalid_argument(fmt::format("plan '{}': shares '*{}' of {} are not {} with positive numbers", plan, text,
                                            d.spec, form));
  d.shares_given = true;
}

}  // namespace

std::vector<uint32_t> proportional_shares(uint32_t total, const std::vector<double>& weights) {
  // Relative to the largest weight, so that huge weights (1e308) cannot make the sum infinite.
  const double top = *std::max_element(weights.begin(), weights.end());
  double sum = 0;
  for (double w : weights) sum += w / top;
  std::vector<uint32_t> out(weights.size());
  std::vector<std::pair<double, size_t>> rest;
  uint32_t given = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    const double exact = total * (weights[i] / top) / sum;
    out[i] = static_cast<uint32_t>(std::floor(exact));
    given += out[i];
    rest.emplace_back(exact - out[i], i);
  }
  std::sort(rest.begin(), rest.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t i = 0; given < total; ++i, ++given) ++out[rest[i % rest.size()].second];
  return out;
}

uint64_t weight_bytes(const Gpt2Config& cfg, const PlanDevice& d, uint32_t layers, bool first_of_stage) {
  const uint64_t E = cfg.width, D = cfg.head_dim();
  const uint64_t qkv = 3 * D * d.heads, attn_rows = D * d.heads;
  const uint64_t weights = E * qkv + attn_rows * E + E * d.mlp + uint64_t{d.mlp} * E;
  const uint64_t columns = qkv + E + d.mlp + E;
  const uint64_t biases = qkv + d.mlp + (first_of_stage ? 2 * E : 0);
  const bool bf16 = d.precision == GpuPrecision::kBf16;
  const uint64_t per_layer = !d.accelerator() ? 4 * (weights + biases) : bf16 ? 2 * weights : weights + 4 * columns;
  const uint64_t head = !d.accelerator() ? 4ull * d.vocab * E
                        : bf16           ? 2ull * d.vocab * E
                                         : uint64_t{d.vocab} * E + 4ull * d.vocab;
  return per_layer * layers + head;
}

Plan Plan::parse(const std::string& text) {
  if (text.empty()) throw std::invalid_argument("the plan is empty");
  Plan plan;
  std::set<std::string> seen;
  for (const std::string& stage_text : split(text, ';')) {
    const size_t at = stage_text.find('@');
    if (at == std::string::npos)
      throw std::invalid_argument(fmt::format("plan '{}': stage '{}' is not LAYERS@DEVICES", text, stage_text));
    Stage st;
    const std::string range = stage_text.substr(0, at);
    const size_t dash = range.find('-');
    st.first = layer_number(range.substr(0, dash), text);
    st.last = dash == std::string::npos ? st.first : layer_number(range.substr(dash + 1), text);
    if (st.last < st.first)
      throw std::invalid_argument(fmt::format("plan '{}': layer range '{}' runs backwards", text, range));
    for (std::string dev_text : split(stage_text.substr(at + 1), '+')) {
      PlanDevice d;
      // rK: names the MPI rank (a device kind never starts with r and a digit).
      // (Checked by hand: std::regex recurses once per character and overflows the stack on a
      // long run of digits.)
      if (const size_t end = dev_text.find_first_not_of("0123456789", 1);
          dev_text.starts_with('r') && end > 1 && end != std::string::npos && dev_text[end] == ':') {
        const size_t colon = dev_text.find(':');
        const auto rank = parse_uint(dev_text.substr(1, colon - 1), 0, 1 << 20);
        if (!rank) throw std::invalid_argument(fmt::format("plan '{}': bad rank in '{}'", text, dev_text));
        d.rank = static_cast<int>(*rank);
        d.rank_given = true;
        dev_text = dev_text.substr(colon + 1);
      }
      d.spec = dev_text;
      if (const size_t star = dev_text.rfind('*'); star != std::string::npos) {
        d.spec = dev_text.substr(0, star);
        const std::string w = dev_text.substr(star + 1);
        const auto r = std::from_chars(w.data(), w.data() + w.size(), d.weight);
        if (w.starts_with('h')) {
          parse_shares(w, d, text);
        } else if (w.empty() || r.ec != std::errc() || r.ptr != w.data() + w.size() || !(d.weight > 0) ||
                   !std::isfinite(d.weight))
          throw std::invalid_argument(fmt::format("plan '{}': weight '{}' of {} is not a positive number", text, w,
                                                  d.spec));
        // A second '*' (even inside an xdma path) would make the printed plan read differently.
        if (d.spec.find('*') != std::string::npos)
          throw std::invalid_argument(fmt::format("plan '{}': device '{}' has more than one *WEIGHT", text, dev_text));
      }
      if (d.spec.empty()) throw std::invalid_argument(fmt::format("plan '{}': an empty device in stage '{}'", text, stage_text));
      d.kind = d.spec.substr(0, d.spec.find_first_of(":?"));
      if (d.kind == "cpu") {
        if (d.spec != "cpu") throw std::invalid_argument(fmt::format("plan '{}': the cpu device takes no index or options", text));
      } else if (d.kind == "cuda") {
        // cuda[:i][?gpu=NAME&precision=P&projected=1]: NAME picks the published peaks used where no
        // GPU is present (or where projected=1 asks for a projection even though one is); P is the
        // GEMMs' precision.
        std::string base = d.spec;
        if (const size_t q = base.find('?'); q != std::string::npos) {
          for (const std::string& opt : split(base.substr(q + 1), '&')) {
            if (opt.starts_with("gpu=")) {
              d.gpu = opt.substr(4);
              gpu_peaks(d.gpu);  // throws for an unknown GPU
            } else if (opt.starts_with("precision=")) {
              d.precision = parse_gpu_precision(opt.substr(10));
            } else if (opt == "projected=1" || opt == "projected=0") {
              d.projected = opt.back() == '1';
            } else {
              throw std::invalid_argument(fmt::format(
                  "plan '{}': cuda takes the options gpu=NAME, precision=fp32|bf16|int8 and projected=0|1, not '{}'", text,
                  opt));
            }
          }
          base = base.substr(0, q);
        }
        const auto index = parse_uint(base.size() > 5 ? base.substr(5) : "0", 0, 1023);
        if ((base.size() > 4 && base[4] != ':') || !index)
          throw std::invalid_argument(fmt::format("plan '{}': '{}' is not cuda[:i]", text, d.spec));
        d.gpu_index = static_cast<uint32_t>(*index);
      } else {
        try {
          const driver::DeviceSpec ds = driver::DeviceSpec::parse(d.spec);  // model, rtl, xdma; throws for anything else
          d.spec = ds.str();
          // its numerics: the device option precision=int8|bf16 (the device checks the value)
          d.precision = ds.option("precision", "int8") == "bf16" ? GpuPrecision::kBf16 : GpuPrecision::kInt8;
        } catch (const driver::UsageError& e) {
          throw std::invalid_argument(fmt::format("plan '{}': {}", text, e.what()));
        }
      }
      const std::string where = d.rank_given ? fmt::format("r{}:{}", d.rank, d.spec) : d.spec;
      if (!seen.insert(where).second)
        throw std::invalid_argument(fmt::format("plan '{}': device {} appears twice (one worker per device)", text, where));
      d.label = where;
      st.devices.push_back(d);
    }
    plan.stages.push_back(std::move(st));
  }
  return plan;
}

std::vector<std::string> Plan::split_list(const std::string& text) {
  static const std::regex stage_start(R"(^\d+(-\d+)?@)");
  std::vector<std::string> out;
  for (const std::string& piece : split(text, ',')) {
    if (out.empty() || piece.empty() || std::regex_search(piece, stage_start))
      out.push_back(piece);
    else
      out.back() += "," + piece;
  }
  return out;
}

Plan Plan::single(const std::string& device, uint32_t layers) {
  return parse(layers > 1 ? fmt::format("0-{}@{}", layers - 1, device) : fmt::format("0@{}", device));
}

void Plan::resolve(const Gpt2Config& cfg) {
  std::vector<int> owner(cfg.layers, -1);
  for (size_t s = 0; s < stages.size(); ++s) {
    const Stage& st = stages[s];
    if (st.last >= cfg.layers)
      throw std::invalid_argument(fmt::format("plan: stage {} names layer {}, but the model has layers 0-{}", s,
                                              st.last, cfg.layers - 1));
    for (uint32_t l = st.first; l <= st.last; ++l) {
      if (owner[l] >= 0)
        throw std::invalid_argument(fmt::format("plan: layer {} is in stage {} and in stage {}", l, owner[l], s));
      owner[l] = static_cast<int>(s);
    }
    if (s > 0 && st.first <= stages[s - 1].last)
      throw std::invalid_argument(fmt::format("plan: stage {} starts before stage {} ends: stages run in layer order", s,
                                              s - 1));
  }
  for (uint32_t l = 0; l < cfg.layers; ++l)
    if (owner[l] < 0) throw std::invalid_argument(fmt::format("plan: no stage runs layer {}", l));

  for (size_t s = 0; s < stages.size(); ++s) {
    Stage& st = stages[s];
    if (st.devices.size() > cfg.heads)
      throw std::invalid_argument(fmt::format("plan: stage {} shards over {} devices, but the model has only {} heads",
                                              s, st.devices.size(), cfg.heads));
    const bool last = s + 1 == stages.size();
    const size_t given = std::count_if(st.devices.begin(), st.devices.end(), [](const auto& d) { return d.shares_given; });
    if (given != 0 && given != st.devices.size())
      throw std::invalid_argument(
          fmt::format("plan: stage {} gives some devices explicit shares (*hH/cC) and others none: give all or none", s));
    if (given == 0) {
      std::vector<double> w;
      for (const auto& d : st.devices) w.push_back(d.weight);
      const auto heads = proportional_shares(cfg.heads, w), mlp = proportional_shares(4 * cfg.width, w),
                 vocab = proportional_shares(cfg.vocab, w);
      for (size_t i = 0; i < st.devices.size(); ++i) {
        PlanDevice& d = st.devices[i];
        if (heads[i] == 0)
          throw std::invalid_argument(fmt::format("plan: {} gets no attention head with weight {} of stage {}", d.spec,
                                                  d.weight, s));
        d.heads = heads[i], d.mlp = mlp[i], d.vocab = last ? vocab[i] : 0;
      }
    } else {
      uint64_t heads = 0, mlp = 0, vocab = 0;
      for (const auto& d : st.devices) {
        heads += d.heads, mlp += d.mlp, vocab += d.vocab;
        if ((d.vocab > 0) != last)
          throw std::invalid_argument(fmt::format("plan: {} in stage {}: /vROWS (its output rows) {}", d.spec, s,
                                                  last ? "is needed in the last stage" : "belongs in the last stage only"));
      }
      if (heads != cfg.heads || mlp != 4 * cfg.width || (last && vocab != cfg.vocab))
        throw std::invalid_argument(fmt::format(
            "plan: stage {}'s shares add up to {} heads, {} MLP columns{}; the model has {}, {}{}", s, heads, mlp,
            last ? fmt::format(" and {} output rows", vocab) : "", cfg.heads, 4 * cfg.width,
            last ? fmt::format(" and {}", cfg.vocab) : ""));
    }
    uint32_t h0 = 0, m0 = 0, v0 = 0;
    for (size_t i = 0; i < st.devices.size(); ++i) {
      PlanDevice& d = st.devices[i];
      d.head_begin = h0, d.mlp_begin = m0, d.vocab_begin = v0;
      h0 += d.heads, m0 += d.mlp, v0 += d.vocab;
      d.weight_bytes = weight_bytes(cfg, d, st.last - st.first + 1, i == 0);
    }
  }
}

void Plan::assign_ranks(int world) {
  size_t given = 0, total = 0;
  for (const Stage& st : stages)
    for (const PlanDevice& d : st.devices) {
      given += d.rank_given;
      ++total;
    }
  if (given != 0 && given != total)
    throw std::invalid_argument("plan: either every device names its rank (r0:rtl:0) or none does");
  int next = 0;
  for (Stage& st : stages)
    for (PlanDevice& d : st.devices) {
      if (!d.rank_given) d.rank = next++ % world;
      if (d.rank >= world)
        throw std::invalid_argument(fmt::format("plan: device {} is on rank {}, but the run has {} process{}", d.spec,
                                                d.rank, world, world == 1 ? " (start it with mpirun)" : "es"));
      d.label = world > 1 || d.rank_given ? fmt::format("r{}:{}", d.rank, d.spec) : d.spec;
    }
}

std::vector<const PlanDevice*> Plan::devices_of(int rank) const {
  std::vector<const PlanDevice*> out;
  for (const Stage& st : stages)
    for (const PlanDevice& d : st.devices)
      if (d.rank == rank) out.push_back(&d);
  return out;
}

std::string Plan::str() const {
  std::string out;
  for (const Stage& st : stages) {
    if (!out.empty()) out += ';';
    out += st.first == st.last ? fmt::format("{}@", st.first) : fmt::format("{}-{}@", st.first, st.last);
    for (size_t i = 0; i < st.devices.size(); ++i) {
      out += (i ? "+" : "") + (st.devices[i].rank_given ? fmt::format("r{}:", st.devices[i].rank) : "") +
             st.devices[i].spec;
      if (st.devices[i].shares_given) {
        const PlanDevice& d = st.devices[i];
        out += fmt::format("*h{}/c{}", d.heads, d.mlp) + (d.vocab ? fmt::format("/v{}", d.vocab) : "");
      } else if (st.devices[i].weight != 1) {
        // The shortest form that reads back exactly, without the '+' of an exponent ("1e+20"),
        // which would split the device list.
        std::string w = fmt::format("{}", st.devices[i].weight);
        if (const size_t e = w.find("e+"); e != std::string::npos) w.erase(e + 1, 1);
        out += "*" + w;
      }
    }
  }
  return out;
}

double Plan::expected_bubble(uint32_t microbatches) const {
  const double p = static_cast<double>(stages.size()), m = std::max<uint32_t>(1, microbatches);
  return (p - 1) / (m + p - 1);
}

Schedule gpipe_schedule(const std::vector<std::vector<double>>& seconds) {
  Schedule out;
  out.stages = seconds.size();
  std::vector<double> done;  // the previous stage's finish per microbatch
  for (const auto& stage : seconds) {
    done.resize(stage.size(), 0.0);
    double last = 0;  // this stage's previous microbatch
    for (size_t j = 0; j < stage.size(); ++j) {
      last = std::max(last, done[j]) + stage[j];
      done[j] = last;
      out.busy += stage[j];
    }
  }
  out.makespan = done.empty() ? 0 : done.back();
  return out;
}

}  // namespace tessera
