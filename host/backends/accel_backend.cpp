#include "tessera/backends/accel_backend.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "tessera/model/float_formats.hpp"
#include "tessera/runtime/quantize.hpp"

namespace tessera {

namespace {

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// Keys and values in device memory as rows of one position each, int8 with a scale per position
// or bf16: the keys are the left-hand operand of k q^T, the values the
// right-hand one of p v (int8: their scales folded into p). One block of `capacity` rows per
// sequence and head.
class AccelKvCache final : public KvCache {
 public:
  AccelKvCache(driver::Device& dev, uint32_t batch, uint32_t heads, uint32_t head_dim, uint32_t capacity, bool bf16)
      : KvCache(batch, heads, head_dim, capacity, false),
        bf16(bf16),
        ld(AccelBackend::operand_ld(head_dim, bf16)),
        k_buf(dev.alloc(AccelBackend::kv_bytes(batch, heads, head_dim, capacity, bf16) / 2, AccelBackend::kBufferAlign)),
        v_buf(dev.alloc(k_buf.size(), AccelBackend::kBufferAlign)),
        k_scale(uint64_t{batch} * heads * capacity),
        v_scale(k_scale.size()) {}
  uint64_t bytes() const override { return k_buf.size() + v_buf.size(); }
  uint64_t offset(uint32_t seq, uint32_t head) const {
    return AccelBackend::kv_offset(seq, head, heads, head_dim, capacity, bf16);
  }
  float* keys_scale(uint32_t seq, uint32_t head) { return &k_scale[(uint64_t{seq} * heads + head) * capacity]; }
  float* values_scale(uint32_t seq, uint32_t head) { return &v_scale[(uint64_t{seq} * heads + head) * capacity]; }

  const bool bf16;
  const uint64_t ld;  // bytes from one position to the next
  driver::Buffer k_buf, v_buf;

 private:
  std::vector<float> k_scale, v_scale;
};

}  // namespace

void AccelBackend::encode_rows(const float* x, uint32_t rows, uint32_t cols, uint64_t ld, uint8_t* img,
                               float* scale) const {
  for (uint32_t r = 0; r < rows; ++r) {
    const float* row = x + uint64_t{r} * cols;
    uint8_t* out = img + r * ld;
    if (bf16_)
      for (uint32_t c = 0; c < cols; ++c) {
        const uint16_t v = float_to_bf16(row[c]);
        std::memcpy(out + 2ull * c, &v, 2);
      }
    else
      scale[r] = quantize_row(row, cols, out);
  }
}

AccelBackend::Operand AccelBackend::upload_a(const float* a, uint32_t m, uint32_t k) {
  const auto start = std::chrono::steady_clock::now();
  Operand op;
  op.rows = m;
  op.cols = k;
  op.ld = operand_ld(k, bf16_);
  if (!bf16_) op.scale.resize(m);
  std::vector<uint8_t> img(op.ld * m, 0);
  encode_rows(a, m, k, op.ld, img.data(), op.scale.data());
  op.buf = dev_.alloc(img.size(), kBufferAlign);
  dev_.write(op.buf, 0, img);
  phase("dma", bf16_ ? "upload A (bf16)" : "upload A (int8)", start);
  return op;
}

AccelBackend::Operand AccelBackend::upload_b(const float* b, uint32_t k, uint32_t n, bool transposed) {
  const auto start = std::chrono::steady_clock::now();
  Operand op;
  op.rows = k;
  op.cols = n;
  op.ld = operand_ld(n, bf16_);
  auto at = [&](uint32_t r, uint32_t c) { return transposed ? b[uint64_t{c} * k + r] : b[uint64_t{r} * n + c]; };
  if (bf16_) {
    std::vector<uint8_t> img(op.ld * k, 0);
    for (uint32_t r = 0; r < k; ++r)
      for (uint32_t c = 0; c < n; ++c) {
        const uint16_t v = float_to_bf16(at(r, c));
        std::memcpy(&img[r * op.ld + 2ull * c], &v, 2);
      }
    op.buf = dev_.alloc(img.size(), kBufferAlign);
    dev_.write(op.buf, 0, img);
    phase("dma", "upload B (bf16)", start);
    return op;
  }
  op.scale.assign(n, 0.0f);
  for (uint32_t r = 0; r < k; ++r)
    for (uint32_t c = 0; c < n; ++c) op.scale[c] = std::max(op.scale[c], std::abs(at(r, c)));
  for (auto& s : op.scale) s = int8_scale(s);
  std::vector<uint8_t> img(op.ld * k, 0);
  for (uint32_t r = 0; r < k; ++r)
    for (uint32_t c = 0; c < n; ++c) img[r * op.ld + c] = static_cast<uint8_t>(to_int8(at(r, c), 1.0f / op.scale[c]));
  op.buf = dev_.alloc(img.size(), kBufferAlign);
  dev_.write(op.buf, 0, img);
  phase("dma", "upload B (int8)", start);
  return op;
}

void AccelBackend::gemm(const DeviceMatrix& a, const DeviceMatrix& b, float* c) {
  const uint32_t m = a.rows, n = b.cols, k = a.cols;
  if (!bf16_ && k > dev_.properties().k_max)
    throw driver::UsageError(fmt::format("{}: an inner dimension of {} is above the engine's k_max = {}", name(), k,
                                         dev_.properties().k_max));
  auto start = std::chrono::steady_clock::now();
  const GemmOperands g{m, n, k, a.addr, a.ld, b.addr, b.ld};
  uint64_t c_bytes = 0;
  std::vector<Descriptor> descs = gemm_descriptors(dev_.properties().engine(), bf16_, g, dataflow_, &c_bytes);
  driver::Buffer cbuf = dev_.alloc(c_bytes, kBufferAlign);
  for (Descriptor& d : descs) {
    d.c_addr += cbuf.addr();
    if (d.flags & spec::desc::FLAG_ACCUMULATE) d.cin_addr += cbuf.addr();
  }
  const driver::Counters before = dev_.counters();
  dev_.wait(dev_.submit(descs));
  phase("compute", bf16_ ? "bf16 GEMM" : "int8 GEMM", start);
  const driver::Counters delta = dev_.counters() - before;
  stats_.gemms += descs.size();
  stats_.macs += delta.macs;
  stats_.cycles += delta.busy_cycles;
  stats_.read_bytes += delta.read_bytes;
  stats_.write_bytes += delta.write_bytes;
  stats_.activity += activity_of(delta, descs, dev_.properties().engine());
  if (projection_)
    for (const Descriptor& d : gemm_descriptors(*projection_, bf16_, g, projection_dataflow_))
      stats_.projected_cycles += estimate(d, *projection_, projection_mem_).cycles;
  start = std::chrono::steady_clock::now();
  std::vector<uint8_t> out(c_bytes);
  dev_.read(cbuf, 0, out);
  const uint64_t ldc = c_ld(n), part_bytes = align_ld(ldc * m);
  const uint32_t k_parts = static_cast<uint32_t>(c_bytes / part_bytes);
  if (bf16_) {  // the engine's fp32 sums, the parts of K already added
    for (uint32_t r = 0; r < m; ++r) std::memcpy(c + uint64_t{r} * n, &out[r * ldc], 4ull * n);
    phase("dma", "download C (fp32)", start);
    return;
  }
  for (uint32_t r = 0; r < m; ++r)
    for (uint32_t col = 0; col < n; ++col) {
      // split-K parts add as the engine's int32 accumulator does: wrapping
      uint32_t acc = 0;
      for (uint32_t p = 0; p < k_parts; ++p) {
        uint32_t v;
        std::memcpy(&v, &out[p * part_bytes + r * ldc + uint64_t{col} * 4], 4);
        acc += v;
      }
      c[uint64_t{r} * n + col] =
          static_cast<float>(static_cast<int32_t>(acc)) * a.scale[r] * (b.scale ? b.scale[col] : 1.0f);
    }
  phase("dma", "download C (int32)", start);
}

std::vector<Descriptor> AccelBackend::gemm_descriptors(const EngineConfig& cfg, bool bf16, const GemmOperands& g,
                                                       DataflowCache& chosen, uint64_t* c_bytes) {
  const uint64_t ldc = c_ld(g.n);
  Descriptor whole;
  whole.opcode = static_cast<uint8_t>(spec::Opcode::kGemm);
  whole.precision = static_cast<uint8_t>(bf16 ? spec::Precision::kBf16 : spec::Precision::kInt8);
  whole.out_mode = static_cast<uint8_t>(bf16 ? spec::OutMode::kFp32 : spec::OutMode::kInt32);
  whole.m = g.m;
  whole.n = g.n;
  whole.k = g.k;
  whole.lda = static_cast<uint32_t>(g.lda);
  whole.ldb = static_cast<uint32_t>(g.ldb);
  whole.ldc = static_cast<uint32_t>(ldc);
  // Decode-sized products may take another dataflow (int8), K above bf16's limit goes in parts;
  // rows past the engine's 16-bit M limit go in further GEMMs.
  const Dataflow df = bf16 ? bf16_dataflow(g.k, cfg.k_max)
                      : g.m <= spec::kDimMax ? choose_dataflow(whole, cfg, chosen)
                                             : Dataflow{};
  const uint64_t part_bytes = align_ld(ldc * g.m);
  if (c_bytes) *c_bytes = part_bytes * (bf16 ? 1 : df.k_parts);  // bf16's parts add up in place
  std::vector<Descriptor> descs;
  for (uint32_t r0 = 0; r0 < g.m; r0 += spec::kDimMax) {
    Descriptor d = whole;
    d.m = std::min<uint32_t>(spec::kDimMax, g.m - r0);
    d.a_addr = g.a_addr + r0 * g.lda;
    d.b_addr = g.b_addr;
    d.c_addr = r0 * ldc;
    for (const Descriptor& part : split(d, df, bf16 ? 0 : part_bytes)) descs.push_back(part);
  }
  return descs;
}

AccelBackend::Dataflow AccelBackend::choose_dataflow(const Descriptor& d, const EngineConfig& cfg,
                                                     DataflowCache& chosen) {
  const std::array<uint32_t, 3> shape{d.m, d.n, d.k};
  if (auto it = chosen.find(shape); it != chosen.end()) return it->second;
  Dataflow best;
  if (cfg.fold && d.m <= cfg.rows / 2) {
    const Dataflow fold{true, (d.k + cfg.k_max / 2 - 1) / (cfg.k_max / 2)};
    const uint64_t part_bytes = align_ld(uint64_t{d.ldc} * d.m);
    uint64_t folded = 0;
    bool valid = true;
    for (const Descriptor& part : split(d, fold, part_bytes)) {
      valid = valid && !validate(part, 0, cfg);
      folded += estimate(part, cfg, MemoryModelConfig{}).cycles;
    }
    if (valid && folded < estimate(d, cfg, MemoryModelConfig{}).cycles) best = fold;
  }
  return chosen.emplace(shape, best).first->second;
}

AccelBackend::Dataflow AccelBackend::bf16_dataflow(uint32_t k, uint32_t k_max) {
  return {false, (k + k_max / 2 - 1) / (k_max / 2)};
}

std::vector<Descriptor> AccelBackend::split(const Descriptor& d, Dataflow df, uint64_t part_bytes) {
  Descriptor base = d;
  if (df.fold) base.flags |= spec::desc::FLAG_FOLD;
  if (df.k_parts == 1) return {base};
  // Equal parts of K, each a multiple of the alignment so that A's columns start aligned.
  const uint32_t elem = d.in_bytes();
  const uint32_t per = static_cast<uint32_t>(align_up((d.k + df.k_parts - 1) / df.k_parts, spec::kAlignBytes / elem));
  std::vector<Descriptor> parts;
  for (uint32_t p = 0, k0 = 0; k0 < d.k; ++p, k0 += per) {
    Descriptor part = base;
    part.k = std::min(per, d.k - k0);
    part.a_addr = d.a_addr + uint64_t{k0} * elem;
    part.b_addr = d.b_addr + uint64_t{k0} * d.ldb;
    part.c_addr = d.c_addr + p * part_bytes;
    if (part_bytes == 0 && p > 0) {  // in place: this part adds the sums so far, as its C_in
      part.flags |= spec::desc::FLAG_ACCUMULATE;
      part.cin_addr = part.c_addr;
      part.ldcin = part.ldc;
    }
    parts.push_back(part);
  }
  return parts;
}

void AccelBackend::matmul(const float* a, const float* b, float* c, uint32_t m, uint32_t n, uint32_t k,
                          bool b_transposed) {
  const Operand rhs = upload_b(b, k, n, b_transposed);
  gemm(upload_a(a, m, k).matrix(), rhs.matrix(), c);
}

void AccelBackend::linear(const float* x, uint32_t m, const Linear& w, float* y) {
  auto it = weights_.find(&w);
  if (it == weights_.end()) it = weights_.emplace(&w, upload_b(w.w.data(), w.in, w.out, false)).first;
  gemm(upload_a(x, m, w.in).matrix(), it->second.matrix(), y);
  for (uint32_t r = 0; r < m; ++r)
    for (uint32_t c = 0; c < w.out; ++c) y[uint64_t{r} * w.out + c] += w.b[c];
}

uint64_t AccelBackend::kv_cache_bytes(uint32_t batch, uint32_t heads, uint32_t head_dim, uint32_t capacity) const {
  return kv_bytes(batch, heads, head_dim, capacity, bf16_);
}

std::unique_ptr<KvCache> AccelBackend::make_kv_cache(uint32_t batch, uint32_t heads, uint32_t head_dim,
                                                     uint32_t capacity) {
  return std::make_unique<AccelKvCache>(dev_, batch, heads, head_dim, capacity, bf16_);
}

void AccelBackend::kv_store(KvCache& kv, uint32_t seq, uint32_t head, const float* k, const float* v,
                            uint32_t tokens) {
  auto& cache = dynamic_cast<AccelKvCache&>(kv);  // made by make_kv_cache
  const auto start = std::chrono::steady_clock::now();
  const uint32_t D = cache.head_dim;
  auto store = [&](const float* x, float* scale, const driver::Buffer& buf) {
    std::vector<uint8_t> img(cache.ld * tokens, 0);
    encode_rows(x, tokens, D, cache.ld, img.data(), scale + cache.length);
    dev_.write(buf, cache.offset(seq, head) + cache.length * cache.ld, img);
  };
  store(k, cache.keys_scale(seq, head), cache.k_buf);
  store(v, cache.values_scale(seq, head), cache.v_buf);
  phase("dma", bf16_ ? "store K, V (bf16)" : "store K, V (int8)", start);
}

void AccelBackend::kv_scores(KvCache& kv, uint32_t seq, uint32_t head, const float* q, uint32_t tokens,
                             float* scores) {
  auto& cache = dynamic_cast<AccelKvCache&>(kv);
  const uint32_t L = cache.length + tokens;
  // k q^T, [L, tokens], with the cached keys as they lie; transposed back on the host.
  const DeviceMatrix keys{cache.k_buf.addr() + cache.offset(seq, head), cache.ld, L, cache.head_dim,
                          bf16_ ? nullptr : cache.keys_scale(seq, head)};
  const Operand q_t = upload_b(q, cache.head_dim, tokens, true);
  std::vector<float> st(uint64_t{L} * tokens);
  gemm(keys, q_t.matrix(), st.data());
  for (uint32_t l = 0; l < L; ++l)
    for (uint32_t t = 0; t < tokens; ++t) scores[uint64_t{t} * L + l] = st[uint64_t{l} * tokens + t];
}

void AccelBackend::kv_mix(KvCache& kv, uint32_t seq, uint32_t head, const float* p, uint32_t tokens, float* out) {
  auto& cache = dynamic_cast<AccelKvCache&>(kv);
  const uint32_t L = cache.length + tokens;
  // int8: the values' per-position scales go into p's columns, so that the product is a plain int8
  // GEMM.
  const float* v_scale = cache.values_scale(seq, head);
  std::vector<float> pv(uint64_t{tokens} * L);
  for (uint32_t t = 0; t < tokens; ++t)
    for (uint32_t l = 0; l < L; ++l) pv[uint64_t{t} * L + l] = p[uint64_t{t} * L + l] * (bf16_ ? 1.0f : v_scale[l]);
  const DeviceMatrix values{cache.v_buf.addr() + cache.offset(seq, head), cache.ld, L, cache.head_dim, nullptr};
  gemm(upload_a(pv.data(), tokens, L).matrix(), values, out);
}

}  // namespace tessera
