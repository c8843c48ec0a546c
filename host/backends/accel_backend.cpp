#include "tessera/backends/accel_backend.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "tessera/runtime/quantize.hpp"

namespace tessera {

namespace {

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace

AccelBackend::Operand AccelBackend::upload_b(const float* b, uint32_t k, uint32_t n, bool transposed) {
  if (k > dev_.properties().k_max)
    throw driver::UsageError(fmt::format("{}: an inner dimension of {} is above the engine's k_max = {}", name(), k,
                                         dev_.properties().k_max));
  const auto start = std::chrono::steady_clock::now();
  Operand op;
  op.k = k;
  op.n = n;
  op.ld = align_up(n, dev_.properties().align);
  auto at = [&](uint32_t r, uint32_t c) { return transposed ? b[uint64_t{c} * k + r] : b[uint64_t{r} * n + c]; };
  op.scale.assign(n, 0.0f);
  for (uint32_t r = 0; r < k; ++r)
    for (uint32_t c = 0; c < n; ++c) op.scale[c] = std::max(op.scale[c], std::abs(at(r, c)));
  for (auto& s : op.scale) s = int8_scale(s);
  std::vector<uint8_t> img(op.ld * k, 0);
  for (uint32_t r = 0; r < k; ++r)
    for (uint32_t c = 0; c < n; ++c) img[r * op.ld + c] = static_cast<uint8_t>(to_int8(at(r, c), 1.0f / op.scale[c]));
  op.buf = dev_.alloc(img.size());
  dev_.write(op.buf, 0, img);
  phase("dma", "upload B (int8)", start);
  return op;
}

void AccelBackend::run(const float* a, uint32_t m, const Operand& b, float* c) {
  const uint64_t al = dev_.properties().align, lda = align_up(b.k, al), ldc = align_up(uint64_t{b.n} * 4, al);
  auto start = std::chrono::steady_clock::now();
  // A per row; rows past the engine's 16-bit M limit go in further GEMMs.
  std::vector<float> row_scale(m);
  std::vector<uint8_t> img(lda * m, 0);
  for (uint32_t r = 0; r < m; ++r) {
    const float* x = a + uint64_t{r} * b.k;
    float peak = 0;
    for (uint32_t i = 0; i < b.k; ++i) peak = std::max(peak, std::abs(x[i]));
    row_scale[r] = int8_scale(peak);
    for (uint32_t i = 0; i < b.k; ++i) img[r * lda + i] = static_cast<uint8_t>(to_int8(x[i], 1.0f / row_scale[r]));
  }
  driver::Buffer abuf = dev_.alloc(img.size()), cbuf = dev_.alloc(ldc * m);
  dev_.write(abuf, 0, img);
  phase("dma", "upload A (int8)", start);
  start = std::chrono::steady_clock::now();
  std::vector<Descriptor> descs;
  for (uint32_t r0 = 0; r0 < m; r0 += spec::kDimMax) {
    Descriptor d;
    d.opcode = static_cast<uint8_t>(spec::Opcode::kGemm);
    d.out_mode = static_cast<uint8_t>(spec::OutMode::kInt32);
    d.m = std::min<uint32_t>(spec::kDimMax, m - r0);
    d.n = b.n;
    d.k = b.k;
    d.a_addr = abuf.addr() + r0 * lda;
    d.b_addr = b.buf.addr();
    d.c_addr = cbuf.addr() + r0 * ldc;
    d.lda = static_cast<uint32_t>(lda);
    d.ldb = static_cast<uint32_t>(b.ld);
    d.ldc = static_cast<uint32_t>(ldc);
    descs.push_back(d);
  }
  const driver::Counters before = dev_.counters();
  dev_.wait(dev_.submit(descs));
  phase("compute", "int8 GEMM", start);
  const driver::Counters delta = dev_.counters() - before;
  stats_.gemms += descs.size();
  stats_.macs += delta.macs;
  stats_.cycles += delta.busy_cycles;
  stats_.read_bytes += delta.read_bytes;
  stats_.write_bytes += delta.write_bytes;
  if (projection_)
    for (const Descriptor& d : descs) stats_.projected_cycles += estimate(d, *projection_, projection_mem_).cycles;
  start = std::chrono::steady_clock::now();
  std::vector<uint8_t> out(ldc * m);
  dev_.read(cbuf, 0, out);
  for (uint32_t r = 0; r < m; ++r)
    for (uint32_t col = 0; col < b.n; ++col) {
      int32_t acc;
      std::memcpy(&acc, &out[r * ldc + uint64_t{col} * 4], 4);
      c[uint64_t{r} * b.n + col] = static_cast<float>(acc) * row_scale[r] * b.scale[col];
    }
  phase("dma", "download C (int32)", start);
}

void AccelBackend::matmul(const float* a, const float* b, float* c, uint32_t m, uint32_t n, uint32_t k,
                          bool b_transposed) {
  run(a, m, upload_b(b, k, n, b_transposed), c);
}

void AccelBackend::linear(const float* x, uint32_t m, const Linear& w, float* y) {
  auto it = weights_.find(&w);
  if (it == weights_.end()) it = weights_.emplace(&w, upload_b(w.w.data(), w.in, w.out, false)).first;
  run(x, m, it->second, y);
  for (uint32_t r = 0; r < m; ++r)
    for (uint32_t c = 0; c < w.out; ++c) y[uint64_t{r} * w.out + c] += w.b[c];
}

}  // namespace tessera
