// Prefill and decode with KV caches (Pipeline::start and step) against the whole-sequence forward
// pass, on one device and over shards, stages and microbatches.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "tessera/backends/accel_backend.hpp"
#include "tessera/backends/cpu_backend.hpp"
#include "tessera/backends/host_ops.hpp"
#include "tessera/io/gpt2.hpp"
#include "tessera/runtime/perplexity.hpp"
#include "tessera/runtime/transformer.hpp"
#include "test_backends.hpp"

using namespace tessera;

namespace {

std::vector<int32_t> some_tokens(const Gpt2Config& cfg, uint32_t n) {
  std::vector<int32_t> t(n);
  for (uint32_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>((i * 97 + 5) % cfg.vocab);
  return t;
}

// Rows [r0, r0 + n) of each of `batch` sequences of `seq` rows of width w.
template <class T>
std::vector<T> rows_of(const std::vector<T>& all, uint32_t batch, uint32_t seq, uint32_t r0, uint32_t n, uint32_t w) {
  std::vector<T> out;
  for (uint32_t b = 0; b < batch; ++b) {
    const auto first = all.begin() + (uint64_t{b} * seq + r0) * w;
    out.insert(out.end(), first, first + uint64_t{n} * w);
  }
  return out;
}

// Prefill with the first `prompt` tokens of each sequence, then decode the rest one at a time; the
// logits of every step put together in the whole-sequence forward pass's layout.
std::vector<float> prefill_then_decode(Pipeline& p, const std::vector<int32_t>& tokens, uint32_t batch, uint32_t seq,
                                       uint32_t prompt, uint32_t microbatches, uint32_t vocab) {
  p.start(batch, seq, microbatches);
  std::vector<float> all(uint64_t{batch} * seq * vocab);
  auto put = [&](const std::vector<float>& logits, uint32_t r0, uint32_t n) {
    for (uint32_t b = 0; b < batch; ++b)
      std::copy_n(&logits[uint64_t{b} * n * vocab], uint64_t{n} * vocab, &all[(uint64_t{b} * seq + r0) * vocab]);
  };
  put(p.step(rows_of(tokens, batch, seq, 0, prompt, 1), prompt), 0, prompt);
  for (uint32_t t = prompt; t < seq; ++t) {
    CHECK(p.position() == t);
    put(p.step(rows_of(tokens, batch, seq, t, 1, 1), 1), t, 1);
  }
  return all;
}

}  // namespace

TEST_CASE("prefill and decode give the logits of the whole-sequence pass", "[unit][gpt2][generation]") {
  const Gpt2Model m = Gpt2Model::tiny(21);
  const uint32_t batch = 3, seq = 20, prompt = 12, V = m.cfg.vocab;
  const auto tokens = some_tokens(m.cfg, batch * seq);
  CpuBackend cpu;
  const auto whole = forward(m, tokens, batch, seq, cpu);

  Pipeline p(m, {StageShards{0, m.cfg.layers - 1, {Shard{&cpu, 0, m.cfg.heads, 0, 4 * m.cfg.width, 0, V}}}});
  const auto stepped = prefill_then_decode(p, tokens, batch, seq, prompt, 1, V);
  const Numerics n = compare_logits(stepped, whole, V);
  INFO("relative L2 " << n.rel_l2);
  CHECK(n.rel_l2 < 1e-5);  // the same sums, in GEMMs of other shapes
  CHECK(n.top1_agreement == 1.0);
  // The caches: keys and values of every layer, fp32, for every position started.
  CHECK(p.kv_cache_bytes() == uint64_t{m.cfg.layers} * 2 * 4 * batch * seq * m.cfg.width);

  SECTION("last_only gives each sequence's last row") {
    p.start(batch, seq);
    const auto last = p.step(tokens, seq, true);
    CHECK(last.size() == uint64_t{batch} * V);
    CHECK(compare_logits(last, rows_of(whole, batch, seq, seq - 1, 1, V), V).rel_l2 < 1e-6);
  }
  SECTION("steps past the positions started, or before a start, are refused") {
    p.start(batch, 4);
    p.step(rows_of(tokens, batch, seq, 0, 4, 1), 4);
    CHECK_THROWS_WITH(p.step(rows_of(tokens, batch, seq, 4, 1, 1), 1), Catch::Contains("do not fit in the 4 positions"));
    p.end();
    CHECK_THROWS_AS(p.step(rows_of(tokens, batch, seq, 0, 1, 1), 1), std::logic_error);
    CHECK_THROWS_WITH(p.start(batch, m.cfg.positions + 1), Catch::Contains("more than the model's"));
    p.start(batch, 4);
    CHECK_THROWS_WITH(p.step(std::vector<int32_t>(batch, -1), 1), Catch::Contains("outside the vocabulary"));
    CHECK_THROWS_WITH(p.step(std::vector<int32_t>(batch + 1, 1), 1), Catch::Contains("token ids for 3 sequences"));
  }
}

TEST_CASE("decoding over shards, stages and microbatches equals one device", "[unit][gpt2][generation][pipeline]") {
  const Gpt2Model m = Gpt2Model::tiny(5);
  const uint32_t batch = 4, seq = 16, prompt = 9, V = m.cfg.vocab;
  const auto tokens = some_tokens(m.cfg, batch * seq);
  CpuBackend one;
  Pipeline single(m, {StageShards{0, 1, {Shard{&one, 0, 4, 0, 512, 0, V}}}});
  const auto ref = prefill_then_decode(single, tokens, batch, seq, prompt, 1, V);

  CpuBackend a, b, c, d, e;
  StageShards s0{0, 0, {{&a, 0, 1, 0, 100}, {&b, 1, 2, 100, 300}, {&c, 3, 1, 400, 112}}};
  StageShards s1{1, 1, {{&d, 0, 2, 0, 256, 0, 200}, {&e, 2, 2, 256, 256, 200, 312}}};
  Pipeline p(m, {s0, s1});
  const auto got = prefill_then_decode(p, tokens, batch, seq, prompt, 3, V);  // microbatches of 2, 1 and 1
  const Numerics n = compare_logits(got, ref, V);
  INFO("relative L2 " << n.rel_l2);
  CHECK(n.rel_l2 < 1e-6);
  CHECK(n.top1_agreement == 1.0);
}

TEST_CASE("int8 decoding on the accelerator model meets the numerics targets", "[unit][gpt2][generation][accel]") {
  const Gpt2Model m = Gpt2Model::tiny(13);
  const uint32_t batch = 2, seq = 24, prompt = 16, V = m.cfg.vocab;
  const auto tokens = some_tokens(m.cfg, batch * seq);
  CpuBackend cpu;
  const auto ref = forward(m, tokens, batch, seq, cpu);
  driver::Device dev(driver::DeviceSpec::parse("model"));
  AccelBackend accel(dev);
  Pipeline p(m, {StageShards{0, 1, {Shard{&accel, 0, 4, 0, 512, 0, V}}}});
  const auto stepped = prefill_then_decode(p, tokens, batch, seq, prompt, 1, V);
  const Numerics n = compare_logits(stepped, ref, V);
  INFO("cosine " << n.cosine << ", top-1 " << n.top1_agreement);
  CHECK(n.cosine >= 0.995);
  CHECK(n.top1_agreement >= 0.95);
  // The caches are in device memory: int8 keys and values, a row of aligned bytes per position.
  const uint64_t row = (m.cfg.head_dim() + dev.properties().align - 1) / dev.properties().align * dev.properties().align;
  CHECK(p.kv_cache_bytes() == uint64_t{m.cfg.layers} * 2 * batch * m.cfg.heads * seq * row);
  // Every quantization is per token (or per query row), so the cached steps compute exactly what
  // the whole-sequence pass does.
  CHECK(stepped == forward(m, tokens, batch, seq, accel));
}

TEST_CASE("a step that fails part way ends the generation", "[unit][gpt2][generation]") {
  const Gpt2Model m = Gpt2Model::tiny(4);
  test::FaultyBackend dies("dying", {.dies_at_product = 20, .memory_free = {}});  // in the second layer: the first layer's caches have this step, the second's not
  Pipeline p(m, {StageShards{0, 1, {Shard{&dies, 0, 4, 0, 512, 0, m.cfg.vocab}}}});
  p.start(1, 8);
  CHECK_THROWS_WITH(p.step(std::vector<int32_t>{1, 2, 3}, 3), Catch::Contains("the device died"));
  CHECK(p.kv_cache_bytes() == 0);
  CHECK_THROWS_AS(p.step(std::vector<int32_t>{4}, 1), std::logic_error);  // start again first
}

TEST_CASE("a KV cache that does not fit is refused before the run, naming the device", "[unit][gpt2][generation]") {
  const Gpt2Model m = Gpt2Model::tiny(3);
  const uint64_t need = uint64_t{m.cfg.layers} * 2 * 4 * 2 * 100 * m.cfg.width;  // 2 sequences of 100 positions
  test::FaultyBackend tight("small", {.memory_free = need - 1}), enough("small", {.memory_free = need});
  Pipeline no(m, {StageShards{0, 1, {Shard{&tight, 0, 4, 0, 512, 0, m.cfg.vocab}}}});
  CHECK_THROWS_WITH(no.start(2, 100), Catch::Contains("needs 0.4 MiB on small, which has 0.4 MiB free"));
  Pipeline yes(m, {StageShards{0, 1, {Shard{&enough, 0, 4, 0, 512, 0, m.cfg.vocab}}}});
  yes.start(2, 100);
  CHECK(yes.kv_cache_bytes() == need);
}

TEST_CASE("perplexity: sliding windows score every token once with the context they give",
          "[unit][gpt2][perplexity]") {
  const Gpt2Model m = Gpt2Model::tiny(8);
  const uint32_t V = m.cfg.vocab;
  const auto ids = some_tokens(m.cfg, 40);
  CpuBackend cpu;
  Pipeline p(m, {StageShards{0, 1, {Shard{&cpu, 0, 4, 0, 512, 0, V}}}});

  // One window over everything: the mean of -log p(token t | tokens before it), t = 1..39.
  const auto logits = forward(m, ids, 1, 40, cpu);
  double sum = 0;
  for (uint32_t t = 1; t < 40; ++t) sum += token_nll(std::span(logits).subspan((t - 1) * V, V), ids[t]);
  const Perplexity whole = perplexity(p, m.cfg, ids, 64, 32);
  CHECK(whole.tokens == 39);
  CHECK(whole.windows == 1);
  CHECK(whole.nll == Approx(sum / 39).epsilon(1e-12));
  CHECK(whole.perplexity == Approx(std::exp(sum / 39)).epsilon(1e-12));

  // Windows of 16, 8 apart: tokens 16..23 are scored in the window [8, 24) with context from 8 on.
  const Perplexity sliding = perplexity(p, m.cfg, ids, 16, 8);
  CHECK(sliding.tokens == 39);
  CHECK(sliding.windows == 4);  // [0,16) [8,24) [16,32) [24,40)
  double expect = 0;
  for (uint32_t t = 1; t < 16; ++t) expect += token_nll(std::span(logits).subspan((t - 1) * V, V), ids[t]);
  for (uint32_t begin = 8; begin + 16 <= 40; begin += 8) {
    const auto w = forward(m, std::span(ids).subspan(begin, 16), 1, 16, cpu);
    for (uint32_t t = begin + 8; t < begin + 16; ++t)
      expect += token_nll(std::span(w).subspan((t - 1 - begin) * V, V), ids[t]);
  }
  CHECK(sliding.nll == Approx(expect / 39).epsilon(1e-6));  // the first window in a GEMM of another shape
  CHECK(sliding.nll > whole.nll - 1.0);  // less context, not a different model

  // Windows side by side: each window's first token has no context and is left out.
  CHECK(perplexity(p, m.cfg, ids, 10, 10).tokens == 36);

  CHECK_THROWS_WITH(perplexity(p, m.cfg, std::span(ids).first(1), 16, 8), Catch::Contains("two at least"));
  CHECK_THROWS_WITH(perplexity(p, m.cfg, ids, m.cfg.positions + 1, 8), Catch::Contains("positions"));
  CHECK_THROWS_WITH(perplexity(p, m.cfg, ids, 16, 17), Catch::Contains("stride"));
}

namespace {

// A backend that runs stages as programs (StageProgram) on the host, whole or sharded over several
// such backends, with the ops the pipeline runs op by op for the CPU in the same order, as the
// cuda backend runs them on its GPUs: the pipeline's logits must be the same bits either way. Two
// of its stages side by side hand the residual stream over in memory of their own (feed()), as two
// GPU stages do device to device.
class HostStage final : public StageProgram {
 public:
  HostStage(const StageSpec& spec, int* steps) : spec_(spec), m_(*spec.model), steps_(steps) {}
  void start(const std::vector<uint32_t>& batch_of, uint32_t capacity) override {
    end();
    batch_of_ = batch_of;
    for (uint32_t n : batch_of) {
      caches_.emplace_back();
      inbox_.emplace_back(uint64_t{n} * capacity * m_.cfg.width);
      for (uint32_t l = spec_.first; l <= spec_.last; ++l)
        for (const StageSpec::Part& part : spec_.parts)
          caches_.back().push_back(cpu_.make_kv_cache(n, part.heads, m_.cfg.head_dim(), capacity));
    }
  }
  void end() override { caches_.clear(), inbox_.clear(); }
  uint64_t kv_cache_bytes() const override { return 0; }
  bool feed(StageProgram& next) override {
    auto* to = dynamic_cast<HostStage*>(&next);
    if (!to || spec_.parts[0].vocab || to->spec_.embed) return false;
    next_ = to;
    return true;
  }
  void step(uint32_t j, const int32_t* tokens, const float* x_in, uint32_t T, uint32_t past, bool last_only,
            float* out) override {
    ++*steps_;
    const uint32_t E = m_.cfg.width, V = m_.cfg.vocab, B = batch_of_.at(j), rows = B * T;
    const size_t P = spec_.parts.size();
    if (!spec_.embed && !x_in) x_in = inbox_.at(j).data(), ++fed_steps;
    std::vector<float> x(uint64_t{rows} * E), h(x.size()), sum(x.size());
    for (uint32_t r = 0; r < rows; ++r)
      for (uint32_t c = 0; c < E; ++c)
        x[uint64_t{r} * E + c] = spec_.embed ? m_.wte[uint64_t(tokens[r]) * E + c] + m_.wpe[(past + r % T) * E + c]
                                             : x_in[uint64_t{r} * E + c];
    // x += the parts' partial sums in part order, then (sharded) the model's bias.
    auto add = [&](std::vector<std::vector<float>>& part, const Linear& full) {
      sum = part[0];
      for (size_t i = 1; i < P; ++i)
        for (size_t k = 0; k < sum.size(); ++k) sum[k] += part[i][k];
      for (size_t k = 0; k < x.size(); ++k) x[k] += sum[k];
      for (size_t k = 0; k < x.size() && P > 1; ++k) x[k] += full.b[k % E];
    };
    std::vector<std::vector<float>> part(P, std::vector<float>(x.size()));
    double unused = 0;
    for (uint32_t l = spec_.first; l <= spec_.last; ++l) {
      const Gpt2Block& b = m_.blocks[l];
      layer_norm(x.data(), h.data(), rows, E, b.ln_1, m_.cfg.eps);
      for (size_t i = 0; i < P; ++i) {
        const StageSpec::Weights& w = spec_.parts[i].layers[l - spec_.first];
        std::vector<float> qkv(uint64_t{rows} * w.qkv->out), att(uint64_t{rows} * w.attn_proj->in);
        cpu_.linear(h.data(), rows, *w.qkv, qkv.data());
        attention_with_host_softmax(cpu_, qkv.data(), att.data(), T, *caches_[j][(l - spec_.first) * P + i], &unused);
        cpu_.linear(att.data(), rows, *w.attn_proj, part[i].data());
      }
      add(part, b.attn_proj);
      layer_norm(x.data(), h.data(), rows, E, b.ln_2, m_.cfg.eps);
      for (size_t i = 0; i < P; ++i) {
        const StageSpec::Weights& w = spec_.parts[i].layers[l - spec_.first];
        std::vector<float> up(uint64_t{rows} * w.mlp_up->out);
        cpu_.linear(h.data(), rows, *w.mlp_up, up.data());
        gelu_tanh(up.data(), up.size());
        cpu_.linear(up.data(), rows, *w.mlp_down, part[i].data());
      }
      add(part, b.mlp_proj);
    }
    if (!spec_.parts[0].vocab) {
      if (!out) return (void)std::copy(x.begin(), x.end(), next_->inbox_.at(j).begin());
      return (void)std::copy(x.begin(), x.end(), out);
    }
    layer_norm(x.data(), h.data(), rows, E, m_.ln_f, m_.cfg.eps);
    std::vector<float> last;
    for (uint32_t s = 0; s < B && last_only; ++s)
      last.insert(last.end(), h.begin() + (uint64_t{s} * T + T - 1) * E, h.begin() + (uint64_t{s} * T + T) * E);
    const uint32_t rows_out = last_only ? B : rows;
    for (const StageSpec::Part& p : spec_.parts) {
      std::vector<float> cols(uint64_t{rows_out} * p.vocab->out);
      cpu_.linear(last_only ? last.data() : h.data(), rows_out, *p.vocab, cols.data());
      for (uint32_t r = 0; r < rows_out; ++r)
        std::copy_n(&cols[uint64_t{r} * p.vocab->out], p.vocab->out, &out[uint64_t{r} * V + p.vocab_begin]);
    }
  }
  int fed_steps = 0;  // steps whose input the stage before left in inbox_

 private:
  const StageSpec spec_;
  const Gpt2Model& m_;
  int* steps_;
  CpuBackend cpu_;
  std::vector<uint32_t> batch_of_;
  std::vector<std::vector<std::unique_ptr<KvCache>>> caches_;  // [microbatch][layer * parts + part]
  std::vector<std::vector<float>> inbox_;                       // [microbatch]
  HostStage* next_ = nullptr;
};

class StageBackend final : public MatmulBackend {
 public:
  explicit StageBackend(bool fits = true) : fits_(fits) {}
  std::string name() const override { return "stages"; }
  MatmulStats stats() const override { return cpu_.stats(); }
  void matmul(const float* a, const float* b, float* c, uint32_t m, uint32_t n, uint32_t k, bool t) override {
    cpu_.matmul(a, b, c, m, n, k, t);
  }
  void linear(const float* x, uint32_t m, const Linear& w, float* y) override { cpu_.linear(x, m, w, y); }
  std::unique_ptr<StageProgram> make_stage(const StageSpec& spec) override {
    ++made;
    if (!fits_) throw std::invalid_argument("the weights need 1.0 MiB on stages, which has 0.0 MiB free (1.0 MiB short)");
    for (const StageSpec::Part& p : spec.parts)
      if (!dynamic_cast<StageBackend*>(p.backend)) return nullptr;
    auto program = std::make_unique<HostStage>(spec, &steps);
    stage = program.get();
    return program;
  }
  int made = 0, steps = 0;
  HostStage* stage = nullptr;  // the last one made

 private:
  bool fits_;
  CpuBackend cpu_;
};

size_t count_ops(const Pipeline& p, const std::string& op) {
  return std::count_if(p.log().begin(), p.log().end(), [&](const OpRecord& r) { return r.op == op; });
}

}  // namespace

TEST_CASE("a stage that a device runs as a program gives the op-by-op logits", "[unit][gpt2][generation]") {
  const Gpt2Model m = Gpt2Model::tiny(23);
  const uint32_t batch = 4, seq = 14, prompt = 9, V = m.cfg.vocab, L = m.cfg.layers;
  const auto tokens = some_tokens(m.cfg, batch * seq);
  CpuBackend reference_cpu;
  Pipeline reference(m, {StageShards{0, L - 1, {Shard{&reference_cpu, 0, m.cfg.heads, 0, 4 * m.cfg.width, 0, V}}}});
  const std::vector<float> want = prefill_then_decode(reference, tokens, batch, seq, prompt, 2, V);

  SECTION("one stage, two microbatches: a program step per microbatch and step") {
    StageBackend dev;
    Pipeline p(m, {StageShards{0, L - 1, {Shard{&dev, 0, m.cfg.heads, 0, 4 * m.cfg.width, 0, V}}}});
    CHECK(prefill_then_decode(p, tokens, batch, seq, prompt, 2, V) == want);
    CHECK(dev.made == 1);
    CHECK(dev.steps == 2 * (1 + seq - prompt));
    CHECK(count_ops(p, "stage") == static_cast<size_t>(dev.steps));
    CHECK(count_ops(p, "qkv") == 0);
    // The whole-sequence pass too (all the logits, not the last token's).
    CHECK(p.forward(tokens, batch, seq) == forward(m, tokens, batch, seq, reference_cpu));
  }
  SECTION("with profile_ops the same device runs op by op") {
    StageBackend dev;
    Pipeline p(m, {StageShards{0, L - 1, {Shard{&dev, 0, m.cfg.heads, 0, 4 * m.cfg.width, 0, V}}}});
    p.profile_ops = true;
    CHECK(prefill_then_decode(p, tokens, batch, seq, prompt, 2, V) == want);
    CHECK(dev.made == 0);
    CHECK(count_ops(p, "stage") == 0);
    CHECK(count_ops(p, "qkv") > 0);
  }
  SECTION("a program stage after an op-by-op one takes its residual stream") {
    CpuBackend first;
    StageBackend second;
    Pipeline p(m, {StageShards{0, 0, {Shard{&first, 0, m.cfg.heads, 0, 4 * m.cfg.width, 0, V}}},
                   StageShards{1, L - 1, {Shard{&second, 0, m.cfg.heads, 0, 4 * m.cfg.width, 0, V}}}});
    CHECK(prefill_then_decode(p, tokens, batch, seq, prompt, 2, V) == want);
    CHECK(second.made == 1);
    CHECK(count_ops(p, "stage") == static_cast<size_t>(second.steps));
  }
  SECTION("a stage sharded over two devices runs as one program, its partial sums added in shard order") {
    StageBackend a, b;
    CpuBackend ca, cb;
    const uint32_t H = m.cfg.heads, F = 4 * m.cfg.width;
    auto sharded = [&](MatmulBackend& x, MatmulBackend& y) {
      return StageShards{0, L - 1, {Shard{&x, 0, H / 2, 0, F / 2 + 3, 0, V / 2},
                                    Shard{&y, H / 2, H - H / 2, F / 2 + 3, F - F / 2 - 3, V / 2, V - V / 2}}};
    };
    Pipeline op_by_op(m, {sharded(ca, cb)});
    const auto want_sharded = prefill_then_decode(op_by_op, tokens, batch, seq, prompt, 2, V);
    CHECK(compare_logits(want_sharded, want, V).rel_l2 < 1e-5);
    Pipeline p(m, {sharded(a, b)});
    CHECK(prefill_then_decode(p, tokens, batch, seq, prompt, 2, V) == want_sharded);
    CHECK(a.made == 1);
    CHECK(b.made == 0);  // asked of the first shard's backend
    // A record a device and step: both devices' rows in the report.
    CHECK(count_ops(p, "stage") == 2 * static_cast<size_t>(a.steps));
    CHECK(count_ops(p, "qkv") == 0);
  }
  SECTION("a stage sharded with a device that runs op by op runs op by op") {
    StageBackend a;
    CpuBackend cb;
    const uint32_t H = m.cfg.heads, F = 4 * m.cfg.width;
    Pipeline p(m, {StageShards{0, L - 1, {Shard{&a, 0, H / 2, 0, F / 2, 0, V / 2},
                                           Shard{&cb, H / 2, H - H / 2, F / 2, F - F / 2, V / 2, V - V / 2}}}});
    const auto got = prefill_then_decode(p, tokens, batch, seq, prompt, 2, V);
    CHECK(compare_logits(got, want, V).rel_l2 < 1e-5);
    CHECK(a.made == 1);
    CHECK(count_ops(p, "stage") == 0);
  }
  SECTION("two program stages side by side: the first feeds the second on the devices") {
    StageBackend first, second;
    Pipeline p(m, {StageShards{0, 0, {Shard{&first, 0, m.cfg.heads, 0, 4 * m.cfg.width, 0, V}}},
                   StageShards{1, L - 1, {Shard{&second, 0, m.cfg.heads, 0, 4 * m.cfg.width, 0, V}}}});
    CHECK(prefill_then_decode(p, tokens, batch, seq, prompt, 2, V) == want);
    REQUIRE(second.stage);
    CHECK(second.stage->fed_steps == second.steps);
    CHECK(second.steps == first.steps);
    CHECK(count_ops(p, "stage") == static_cast<size_t>(first.steps + second.steps));
  }
  SECTION("weights that do not fit: every start says so, none falls back to op by op") {
    StageBackend dev(false);
    Pipeline p(m, {StageShards{0, L - 1, {Shard{&dev, 0, m.cfg.heads, 0, 4 * m.cfg.width, 0, V}}}});
    CHECK_THROWS_WITH(p.start(batch, seq), Catch::Contains("MiB short"));
    CHECK_THROWS_WITH(p.start(batch, seq), Catch::Contains("MiB short"));
    CHECK(dev.made == 2);
  }
}
