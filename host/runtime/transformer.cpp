#include "tessera/runtime/transformer.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "shard_worker.hpp"
#include "tessera/backends/host_ops.hpp"

namespace tessera {

void check_tokens(const Gpt2Config& cfg, std::span<const int32_t> tokens, uint32_t batch, uint32_t seq) {
  if (batch == 0 || seq == 0) throw std::invalid_argument("batch and sequence length must be positive");
  if (tokens.size() != uint64_t{batch} * seq)
    throw std::invalid_argument(
        fmt::format("{} token ids for a batch of {} sequences of {} tokens", tokens.size(), batch, seq));
  if (seq > cfg.positions)
    throw std::invalid_argument(
        fmt::format("{} tokens in a sequence, more than the model's {} positions", seq, cfg.positions));
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || static_cast<uint32_t>(tokens[i]) >= cfg.vocab)
      throw std::invalid_argument(
          fmt::format("token id {} (at {}) is outside the vocabulary [0, {})", tokens[i], i, cfg.vocab));
}

namespace {

// Columns [c0, c0 + n) of a linear layer (its bias too), or rows [r0, r0 + n) without the bias.
Linear columns(const Linear& l, const std::vector<std::pair<uint32_t, uint32_t>>& ranges) {
  Linear out;
  out.in = l.in;
  for (const auto& [c0, n] : ranges) out.out += n;
  out.w.resize(uint64_t{out.in} * out.out);
  out.b.reserve(out.out);
  for (const auto& [c0, n] : ranges) out.b.insert(out.b.end(), l.b.begin() + c0, l.b.begin() + c0 + n);
  for (uint32_t r = 0; r < l.in; ++r) {
    uint32_t at = 0;
    for (const auto& [c0, n] : ranges) {
      std::copy_n(&l.w[uint64_t{r} * l.out + c0], n, &out.w[uint64_t{r} * out.out + at]);
      at += n;
    }
  }
  return out;
}

Linear rows(const Linear& l, uint32_t r0, uint32_t n) {
  Linear out{n, l.out, std::vector<float>(l.w.begin() + uint64_t{r0} * l.out, l.w.begin() + uint64_t{r0 + n} * l.out),
             std::vector<float>(l.out, 0.0f)};
  return out;
}

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

std::vector<uint32_t> microbatch_sizes(uint32_t batch, uint32_t microbatches) {
  std::vector<uint32_t> out;
  for (uint32_t j = 0; j < microbatches; ++j) out.push_back(batch / microbatches + (j < batch % microbatches ? 1 : 0));
  return out;
}

uint64_t host_memory_available() {
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);)  // "MemAvailable:   16318168 kB"
    if (line.starts_with("MemAvailable:")) return std::stoull(line.substr(13)) * 1024;
  return uint64_t(sysconf(_SC_AVPHYS_PAGES)) * uint64_t(sysconf(_SC_PAGESIZE));
}

Pipeline::Pipeline(const Gpt2Model& model, std::vector<StageShards> stages, Comm* comm)
    : model_(model), stages_(std::move(stages)), comm_(comm) {
  const Gpt2Config& cfg = model.cfg;
  const uint32_t E = cfg.width, D = cfg.head_dim();
  if (stages_.empty()) throw std::invalid_argument("a pipeline needs a stage");
  // A GPU rank runs one shard of the whole plan, on a real GPU: it can talk to another such rank
  // GPU to GPU, on that GPU.
  std::map<int, std::vector<int>> gpus_of;
  for (const auto& st : stages_)
    for (const Shard& sh : st.shards) gpus_of[sh.rank].push_back(sh.gpu);
  auto gpu_rank = [&](int r) { return gpus_of[r].size() == 1 && gpus_of[r][0] >= 0; };
  const int my_gpu = comm_ && gpu_rank(comm_->rank()) ? gpus_of[comm_->rank()][0] : -1;
  // Every rank makes every group, in the same order, as collectives require.
  for (const auto& st : stages_) {
    std::vector<int> ranks;
    for (const Shard& sh : st.shards) ranks.push_back(comm_ ? sh.rank : 0);
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    members_.push_back(ranks);
    const bool gpus = std::all_of(ranks.begin(), ranks.end(), gpu_rank);
    groups_.push_back(comm_ && ranks.size() > 1 ? comm_->group(ranks, gpus ? my_gpu : -1) : -1);
  }
  for (size_t s = 0; comm_ && s + 1 < stages_.size(); ++s)
    for (int r : members_[s + 1])
      if (!std::binary_search(members_[s].begin(), members_[s].end(), r) && gpu_rank(leader(s)) && gpu_rank(r))
        links_[{s, r}] = comm_->group({std::min(leader(s), r), std::max(leader(s), r)}, my_gpu);
  for (const auto& st : stages_) {
    // A device with all of each layer uses the model's tensors as they are (the projections' biases
    // included, so the reduce adds none).
    const bool whole = st.shards.size() == 1 && st.shards[0].heads == cfg.heads && st.shards[0].mlp == 4 * E;
    whole_.push_back(whole);
    auto keep = [&](Linear l) { return &sliced_.emplace_back(std::move(l)); };
    std::vector<std::vector<Slices>> layers;
    for (uint32_t l = st.first; l <= st.last; ++l) {
      const Gpt2Block& b = model.blocks.at(l);
      std::vector<Slices> per_shard;
      for (const Shard& sh : st.shards) {
        const uint32_t h0 = sh.head_begin * D, hn = sh.heads * D;
        if (!local(sh)) {
          per_shard.push_back({});
          continue;
        }
        per_shard.push_back(whole ? Slices{&b.c_attn, &b.attn_proj, &b.c_fc, &b.mlp_proj}
                                  : Slices{keep(columns(b.c_attn, {{h0, hn}, {E + h0, hn}, {2 * E + h0, hn}})),
                                           keep(rows(b.attn_proj, h0, hn)), keep(columns(b.c_fc, {{sh.mlp_begin, sh.mlp}})),
                                           keep(rows(b.mlp_proj, sh.mlp_begin, sh.mlp))});
      }
      layers.push_back(std::move(per_shard));
    }
    slices_.push_back(std::move(layers));
  }
  for (const Shard& sh : stages_.back().shards) {
    if (!local(sh)) {
      vocab_.emplace_back();
      continue;
    }
    Linear v{E, sh.vocab, std::vector<float>(uint64_t{E} * sh.vocab), std::vector<float>(sh.vocab, 0.0f)};
    for (uint32_t r = 0; r < sh.vocab; ++r)
      for (uint32_t e = 0; e < E; ++e) v.w[uint64_t{e} * sh.vocab + r] = model.wte[uint64_t{sh.vocab_begin + r} * E + e];
    vocab_.push_back(std::move(v));
  }
  // A worker per shard where a stage runs several shards in this process.
  workers_.resize(stages_.size());
  for (size_t s = 0; s < stages_.size(); ++s) {
    const auto n = std::count_if(stages_[s].shards.begin(), stages_[s].shards.end(), [&](const Shard& sh) { return local(sh); });
    if (n > 1)
      for (long i = 0; i < n; ++i) workers_[s].push_back(std::make_unique<ShardWorker>());
  }
}

Pipeline::~Pipeline() {
  for (size_t s = 0; s < stages_.size(); ++s)
    for (size_t i = 0; i < stages_[s].shards.size(); ++i) {
      if (!local(stages_[s].shards[i])) continue;
      MatmulBackend& b = *stages_[s].shards[i].backend;
      for (const auto& layer : slices_[s])
        for (const Linear* l : {layer[i].qkv, layer[i].attn_proj, layer[i].mlp_up, layer[i].mlp_down}) b.release(*l);
      for (uint32_t l = stages_[s].first; l <= stages_[s].last; ++l) {
        b.release(model_.blocks[l].ln_1);
        b.release(model_.blocks[l].ln_2);
      }
      if (s + 1 == stages_.size()) {
        b.release(vocab_[i]);
        b.release(model_.ln_f);
      }
    }
}

std::vector<float> Pipeline::forward(std::span<const int32_t> tokens, uint32_t batch, uint32_t seq,
                                     uint32_t microbatches) {
  check_tokens(model_.cfg, tokens, batch, seq);
  start(batch, seq, microbatches);
  std::vector<float> logits = step(tokens, seq);
  end();
  return logits;
}

void Pipeline::start(uint32_t batch, uint32_t capacity, uint32_t microbatches) {
  const Gpt2Config& cfg = model_.cfg;
  if (batch == 0 || capacity == 0) throw std::invalid_argument("batch and sequence length must be positive");
  if (capacity > cfg.positions)
    throw std::invalid_argument(
        fmt::format("{} positions to generate, more than the model's {}", capacity, cfg.positions));
  if (microbatches == 0 || microbatches > batch)
    throw std::invalid_argument(fmt::format("{} microbatches for a batch of {}", microbatches, batch));
  end();
  make_programs();  // their weights first: the caches are checked against what is left
  microbatch_sizes_ = microbatch_sizes(batch, microbatches);
  // What each device's caches take, checked before any is made: a device that keeps them in its
  // own memory against what it has free, the rest against the host's available memory.
  std::map<MatmulBackend*, uint64_t> on_device;
  uint64_t on_host = 0;
  for (size_t s = 0; s < stages_.size(); ++s)
    for (const Shard& sh : stages_[s].shards) {
      if (!local(sh)) continue;
      uint64_t bytes = 0;
      for (uint32_t n : microbatch_sizes_)
        bytes += (stages_[s].last - stages_[s].first + 1) * sh.backend->kv_cache_bytes(n, sh.heads, cfg.head_dim(), capacity);
      (sh.backend->memory_free() ? on_device[sh.backend] : on_host) += bytes;
    }
  auto mib = [](uint64_t b) { return double(b) / (1 << 20); };
  for (const auto& [b, bytes] : on_device)
    if (const uint64_t free = *b->memory_free(); bytes > free)
      throw std::invalid_argument(fmt::format(
          "the KV cache for {} sequences of {} positions needs {:.1f} MiB on {}, which has {:.1f} MiB free ({:.1f} "
          "MiB short)", batch, capacity, mib(bytes), b->name(), mib(free), mib(bytes - free)));
  if (const uint64_t avail = host_memory_available(); on_host > avail)
    throw std::invalid_argument(fmt::format(
        "the KV cache for {} sequences of {} positions needs {:.1f} MiB of host memory; {:.1f} MiB are available",
        batch, capacity, mib(on_host), mib(avail)));
  for (size_t s = 0; s < stages_.size(); ++s)
    if (programs_[s]) programs_[s]->start(microbatch_sizes_, capacity);
  for (size_t s = 0; s < stages_.size(); ++s)
    for (size_t i = 0; i < stages_[s].shards.size(); ++i) {
      const Shard& sh = stages_[s].shards[i];
      if (!local(sh) || programs_[s]) continue;
      for (uint32_t l = stages_[s].first; l <= stages_[s].last; ++l)
        for (uint32_t j = 0; j < microbatches; ++j)
          caches_[{s, l, i, j}] = sh.backend->make_kv_cache(microbatch_sizes_[j], sh.heads, cfg.head_dim(), capacity);
    }
  capacity_ = capacity;
  position_ = steps_ = 0;
}

void Pipeline::end() {
  caches_.clear();
  for (auto& p : programs_)
    if (p) p->end();
  capacity_ = position_ = 0;
}

uint64_t Pipeline::kv_cache_bytes() const {
  uint64_t bytes = 0;
  for (const auto& [key, cache] : caches_) bytes += cache->bytes();
  for (const auto& p : programs_)
    if (p) bytes += p->kv_cache_bytes();
  return bytes;
}

void Pipeline::make_programs() {
  if (!programs_.empty()) return;  // made once: the weights stay on the device
  std::vector<std::unique_ptr<StageProgram>> made(stages_.size());
  for (size_t s = 0; s < stages_.size() && !profile_ops; ++s) {
    const auto& shards = stages_[s].shards;
    // Every shard in this process (no other rank shares the stage).
    if (groups_[s] >= 0 || !std::all_of(shards.begin(), shards.end(), [&](const Shard& sh) { return local(sh); }))
      continue;
    const bool last = s + 1 == stages_.size();
    StageSpec spec{.model = &model_, .first = stages_[s].first, .last = stages_[s].last, .embed = s == 0, .parts = {}};
    for (size_t i = 0; i < shards.size(); ++i) {
      StageSpec::Part& part = spec.parts.emplace_back();
      part.backend = shards[i].backend;
      part.heads = shards[i].heads;
      for (const auto& layer : slices_[s]) part.layers.push_back(layer[i]);
      if (last) part.vocab = &vocab_[i], part.vocab_begin = shards[i].vocab_begin;
    }
    made[s] = shards[0].backend->make_stage(spec);
  }
  std::vector<bool> fed(stages_.size(), false);
  for (size_t s = 1; s < stages_.size(); ++s) fed[s] = made[s - 1] && made[s] && made[s - 1]->feed(*made[s]);
  programs_ = std::move(made);  // only once every one is made: a failure leaves none
  fed_ = std::move(fed);
}

std::vector<std::string> Pipeline::notes() const {
  std::vector<std::string> out;
  for (size_t s = 0; s < programs_.size(); ++s)
    if (programs_[s])
      for (const std::string& n : programs_[s]->notes())
        out.push_back(fmt::format("{}: {}", stages_[s].shards[0].backend->name(), n));
  return out;
}

std::vector<float> Pipeline::step(std::span<const int32_t> tokens, uint32_t n, bool last_only) {
  if (capacity_ == 0) throw std::logic_error("Pipeline::step before start");
  const uint32_t batch = std::accumulate(microbatch_sizes_.begin(), microbatch_sizes_.end(), 0u);
  if (n == 0 || tokens.size() != uint64_t{batch} * n)
    throw std::invalid_argument(fmt::format("{} token ids for {} sequences of {} tokens", tokens.size(), batch, n));
  if (position_ + n > capacity_)
    throw std::invalid_argument(fmt::format("{} more tokens after {} do not fit in the {} positions started",
                                            n, position_, capacity_));
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || static_cast<uint32_t>(tokens[i]) >= model_.cfg.vocab)
      throw std::invalid_argument(
          fmt::format("token id {} (at {}) is outside the vocabulary [0, {})", tokens[i], i, model_.cfg.vocab));
  const uint32_t rows_out = last_only ? 1 : n;
  std::vector<float> logits(uint64_t{batch} * rows_out * model_.cfg.vocab);
  std::vector<Microbatch> mbs(microbatch_sizes_.size());
  for (uint32_t j = 0, done = 0; j < mbs.size(); ++j) {
    mbs[j] = {.index = j, .batch = microbatch_sizes_[j], .seq = n, .past = position_, .last_only = last_only,
              .tokens = tokens.data() + uint64_t{done} * n,
              .logits = &logits[uint64_t{done} * rows_out * model_.cfg.vocab], .x = {}};
    done += microbatch_sizes_[j];
  }
  try {
    run(mbs, logits);
  } catch (...) {
    end();  // some caches may hold this step's keys and others not: the generation cannot go on
    throw;
  }
  position_ += n;
  ++steps_;
  return logits;
}

void Pipeline::run(std::vector<Microbatch>& mbs, std::vector<float>& logits) {
  const uint32_t microbatches = static_cast<uint32_t>(mbs.size());
  // GPipe: a worker per stage takes the microbatches in order, each as soon as the stage before
  // has handed it over. A stage's devices belong to it alone, so no backend is used by two threads.
  const size_t P = stages_.size();
  std::vector<std::vector<OpRecord>> logs(P);
  std::vector<uint32_t> handed(P + 1, 0);  // handed[s]: microbatches stage s may take
  handed[0] = microbatches;
  std::mutex mu;
  std::condition_variable cv;
  std::exception_ptr error;
  // Across processes, a stage's input comes from the stage before when this process runs part of
  // it, and otherwise from that stage's lowest rank, which sends it to every such process.
  const uint64_t width = model_.cfg.width;
  auto tag = [](size_t stage, uint32_t mb) { return static_cast<int>((stage << 16) | mb); };
  auto worker = [&](size_t s) {
    try {
      for (uint32_t j = 0; j < microbatches; ++j) {
        Microbatch& m = mbs[j];
        if (s == 0 || member(s - 1)) {
          std::unique_lock lock(mu);
          cv.wait(lock, [&] { return handed[s] > j || error; });
          if (error) return;
        } else {
          m.x.resize(uint64_t{m.batch} * m.seq * width);
          communicate(s, j, "recv", m.x.size() * 4, logs[s],
                      [&] { comm_->recv(m.x, leader(s - 1), tag(s, j), link(s - 1, comm_->rank())); });
        }
        run_stage(s, m, logs[s]);
        if (s + 1 < P && comm_ && comm_->rank() == leader(s))
          for (int r : members_[s + 1])
            if (!std::binary_search(members_[s].begin(), members_[s].end(), r))
              communicate(s, j, "send", m.x.size() * 4, logs[s], [&] { comm_->send(m.x, r, tag(s + 1, j), link(s, r)); });
        std::lock_guard lock(mu);
        handed[s + 1] = j + 1;
        cv.notify_all();
      }
    } catch (...) {
      std::lock_guard lock(mu);
      if (!error) error = std::current_exception();
      cv.notify_all();
    }
  };
  std::vector<std::thread> workers;
  for (size_t s = 0; s < P; ++s)
    if (member(s)) workers.emplace_back(worker, s);
  for (auto& w : workers) w.join();
  if (error) std::rethrow_exception(error);
  for (auto& l : logs) log_.insert(log_.end(), l.begin(), l.end());
  if (comm_) {
    // The last stage's ranks hold the logits of their vocabulary shards and zeros elsewhere: their
    // sum is exact. It goes to rank 0.
    std::vector<OpRecord> gather;
    const int last = static_cast<int>(P - 1);
    if (groups_[last] >= 0 && member(last))
      communicate(last, 0, "gather_logits", logits.size() * 4, gather,
                  [&] { comm_->allreduce_sum(logits, groups_[last]); });
    if (leader(last) != 0 && comm_->rank() == leader(last))
      communicate(last, 0, "send_logits", logits.size() * 4, gather, [&] { comm_->send(logits, 0, tag(P, 0), -1); });
    if (leader(last) != 0 && comm_->rank() == 0)
      communicate(last, 0, "recv", logits.size() * 4, gather, [&] { comm_->recv(logits, leader(last), tag(P, 0), -1); });
    log_.insert(log_.end(), gather.begin(), gather.end());
  }
}

int Pipeline::link(size_t stage, int to) const {
  const auto it = links_.find({stage, to});
  return it == links_.end() ? -1 : it->second;
}

bool Pipeline::member(size_t stage) const {
  return !comm_ || std::binary_search(members_[stage].begin(), members_[stage].end(), comm_->rank());
}

void Pipeline::communicate(size_t stage, uint32_t microbatch, const char* op, uint64_t bytes,
                           std::vector<OpRecord>& log, const std::function<void()>& fn) {
  const auto start = Clock::now();
  fn();
  OpRecord rec{.stage = static_cast<int>(stage), .layer = -1, .microbatch = microbatch, .device = "comm", .lane = {},
               .op = op, .start = std::chrono::duration<double>(start - epoch_).count(), .seconds = since(start),
               .cpu_seconds = 0, .cost = {}, .phases = {}, .rank = comm_->rank(), .step = steps_};
  (op == std::string("recv") ? rec.cost.read_bytes : rec.cost.write_bytes) = bytes;
  log.push_back(std::move(rec));
}

// One microbatch through one stage: the stage's operations as methods over what they share (the
// residual stream, its normalized copy, the shards' partial sums), each logged as it runs.
class Pipeline::StageRun {
 public:
  StageRun(Pipeline& p, size_t stage, Microbatch& m, std::vector<OpRecord>& log)
      : p_(p), cfg_(p.model_.cfg), st_(p.stages_[stage]), s_(stage), m_(m), log_(log), rows_(m.batch * m.seq),
        rank_(p.comm_ ? p.comm_->rank() : 0), h_(uint64_t{rows_} * cfg_.width), part_(st_.shards.size()),
        shard_log_(st_.shards.size()) {
    for (size_t i = 0; i < st_.shards.size(); ++i)
      if (p.local(st_.shards[i])) mine_.push_back(i);
  }

  void run() {
    if (s_ == 0) embed();
    for (uint32_t l = st_.first; l <= st_.last; ++l) {
      if (p_.on_layer) p_.on_layer(s_, l, m_.index);
      const Gpt2Block& blk = p_.model_.blocks[l];
      const auto& slices = p_.slices_[s_][l - st_.first];
      const int layer = static_cast<int>(l);
      norm(layer, blk.ln_1);
      each_local([&](size_t i) { attention(layer, i, slices[i]); });
      reduce(layer, blk.attn_proj);
      norm(layer, blk.ln_2);
      each_local([&](size_t i) { mlp(layer, i, slices[i]); });
      reduce(layer, blk.mlp_proj);
    }
    if (s_ + 1 == p_.stages_.size()) {
      norm(-1, p_.model_.ln_f);
      each_local([&](size_t i) { logits(i); });
    }
    for (auto& l : shard_log_) log_.insert(log_.end(), l.begin(), l.end());
  }

 private:
  void embed() {
    const uint32_t E = cfg_.width, T = m_.seq;
    m_.x.resize(uint64_t{rows_} * E);
    host(-1, "embedding", [&] {
      for (uint64_t r = 0; r < rows_; ++r)
        for (uint32_t c = 0; c < E; ++c)
          m_.x[r * E + c] = p_.model_.wte[uint64_t(m_.tokens[r]) * E + c] + p_.model_.wpe[(m_.past + r % T) * E + c];
    });
  }

  // LayerNorm of the whole residual stream into h_: on the device when one device holds the stage
  // and runs such ops, otherwise on the host (every shard needs all of it).
  void norm(int layer, const LayerNormWeights& w) {
    if (st_.shards.size() == 1 && st_.shards[0].backend->runs_other_ops()) {
      device_op(0, layer, "layernorm",
                [&](MatmulBackend& b) { b.layer_norm(m_.x.data(), h_.data(), rows_, cfg_.width, w, cfg_.eps); });
      return;
    }
    host(layer, "layernorm", [&] { tessera::layer_norm(m_.x.data(), h_.data(), rows_, cfg_.width, w, cfg_.eps); });
  }

  // Shard i's heads: q, k and v, the attention core, and its partial sum of the projection.
  void attention(int layer, size_t i, const Slices& w) {
    const uint32_t H = st_.shards[i].heads, D = cfg_.head_dim();
    std::vector<float> qkv(uint64_t{rows_} * 3 * H * D), att(uint64_t{rows_} * H * D);
    device_op(i, layer, "qkv", [&](MatmulBackend& b) { b.linear(h_.data(), rows_, *w.qkv, qkv.data()); });
    KvCache& cache = *p_.caches_.at({s_, static_cast<uint32_t>(layer), i, m_.index});
    if (st_.shards[i].backend->runs_other_ops()) {
      device_op(i, layer, "attention", [&](MatmulBackend& b) { b.attention(qkv.data(), att.data(), m_.seq, cache); });
    } else {
      // The products on the device, the softmax on the host, reported apart.
      double softmax_seconds = 0;
      OpRecord& rec = device_op(i, layer, "attention", [&](MatmulBackend& b) {
        attention_with_host_softmax(b, qkv.data(), att.data(), m_.seq, cache, &softmax_seconds);
      });
      rec.seconds -= softmax_seconds;
      const auto start = p_.epoch_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(rec.start));
      shard_log_[i].push_back(host_record(layer, "softmax", start, softmax_seconds, softmax_seconds, rec.device));
    }
    part_[i].assign(m_.x.size(), 0.0f);
    device_op(i, layer, "attn_proj", [&](MatmulBackend& b) { b.linear(att.data(), rows_, *w.attn_proj, part_[i].data()); });
  }

  // Shard i's columns of the MLP: up, GELU, and its partial sum of the projection down.
  void mlp(int layer, size_t i, const Slices& w) {
    std::vector<float> up(uint64_t{rows_} * w.mlp_up->out);
    if (st_.shards[i].backend->runs_other_ops()) {
      device_op(i, layer, "mlp_up", [&](MatmulBackend& b) { b.linear_gelu(h_.data(), rows_, *w.mlp_up, up.data()); });
    } else {
      device_op(i, layer, "mlp_up", [&](MatmulBackend& b) { b.linear(h_.data(), rows_, *w.mlp_up, up.data()); });
      host(layer, "gelu", [&] { gelu_tanh(up.data(), up.size()); }, i);
    }
    part_[i].assign(m_.x.size(), 0.0f);
    device_op(i, layer, "mlp_down", [&](MatmulBackend& b) { b.linear(up.data(), rows_, *w.mlp_down, part_[i].data()); });
  }

  // Shard i's vocabulary columns of the logits: of every token, or of each sequence's last.
  void logits(size_t i) {
    const Shard& sh = st_.shards[i];
    const uint32_t E = cfg_.width, rows = m_.last_only ? m_.batch : rows_;
    std::vector<float> last;
    if (m_.last_only) {
      last.resize(uint64_t{rows} * E);
      for (uint32_t b = 0; b < m_.batch; ++b)
        std::copy_n(&h_[(uint64_t{b} * m_.seq + m_.seq - 1) * E], E, &last[uint64_t{b} * E]);
    }
    const float* in = m_.last_only ? last.data() : h_.data();
    std::vector<float> out(uint64_t{rows} * sh.vocab);
    device_op(i, -1, "logits", [&](MatmulBackend& b) { b.linear(in, rows, p_.vocab_[i], out.data()); });
    for (uint32_t r = 0; r < rows; ++r)
      std::copy_n(&out[uint64_t{r} * sh.vocab], sh.vocab, &m_.logits[uint64_t{r} * cfg_.vocab + sh.vocab_begin]);
  }

  // x += (sum of the partial sums, in shard order) + bias. Across processes each sums its own
  // shards, then the stage's ranks all-reduce those sums: with two ranks the sum is the same
  // float for float as in one process (addition commutes); with more, MPI (or NCCL) picks the order.
  void reduce(int layer, const Linear& full) {
    std::vector<float> sum = std::move(part_[mine_.front()]);
    host(layer, "reduce_partials", [&] {
      for (size_t k = 1; k < mine_.size(); ++k)
        for (uint64_t j = 0; j < sum.size(); ++j) sum[j] += part_[mine_[k]][j];
    });
    if (p_.groups_[s_] >= 0) {
      // First the wait for the slowest rank (the schedule counts that rank's work, not the wait),
      // then the all-reduce itself.
      p_.communicate(s_, m_.index, "allreduce_wait", 0, log_, [&] { p_.comm_->barrier(p_.groups_[s_]); });
      p_.communicate(s_, m_.index, "allreduce", sum.size() * 4, log_,
                     [&] { p_.comm_->allreduce_sum(sum, p_.groups_[s_]); });
    }
    host(layer, "residual", [&] {
      std::vector<float>& x = m_.x;
      for (uint64_t j = 0; j < x.size(); ++j) x[j] += sum[j];
      if (!p_.whole_[s_])
        for (uint32_t r = 0; r < rows_; ++r)
          for (uint32_t c = 0; c < cfg_.width; ++c) x[uint64_t{r} * cfg_.width + c] += full.b[c];
    });
  }

  // Runs fn(i) for every local shard i, each on its worker when there are several.
  template <class Fn>
  void each_local(Fn&& fn) {
    if (mine_.size() == 1) return fn(mine_[0]);
    auto& workers = p_.workers_[s_];
    for (size_t k = 0; k < mine_.size(); ++k) workers[k]->post([&fn, i = mine_[k]] { fn(i); });
    std::exception_ptr error;
    for (size_t k = 0; k < mine_.size(); ++k) try {
        workers[k]->wait();
      } catch (...) {
        if (!error) error = std::current_exception();
      }
    if (error) std::rethrow_exception(error);
  }

  // Runs one of shard i's operations on its device and logs what it cost.
  template <class Fn>
  OpRecord& device_op(size_t i, int layer, const char* op, Fn&& fn) {
    MatmulBackend& b = *st_.shards[i].backend;
    std::unique_lock alone(p_.timing_, std::defer_lock);
    std::shared_lock beside(p_.timing_, std::defer_lock);
    b.timed_by_wall_clock() ? alone.lock() : beside.lock();
    const MatmulStats before = b.stats();
    const auto start = Clock::now();
    fn(b);
    OpRecord rec{.stage = static_cast<int>(s_), .layer = layer, .microbatch = m_.index, .device = b.name(),
                 .lane = {}, .op = op, .start = since_epoch(start), .seconds = since(start), .cpu_seconds = 0,
                 .cost = b.stats() - before, .phases = {}, .rank = rank_, .step = p_.steps_};
    for (const Phase& ph : b.take_phases())
      rec.phases.push_back({ph.track, ph.name, since_epoch(ph.start), ph.seconds});
    return shard_log_[i].emplace_back(std::move(rec));
  }

  OpRecord host_record(int layer, const char* op, Clock::time_point start, double seconds, double cpu_seconds,
                       std::string lane = {}) const {
    return OpRecord{.stage = static_cast<int>(s_), .layer = layer, .microbatch = m_.index, .device = "host",
                    .lane = std::move(lane), .op = op, .start = since_epoch(start), .seconds = seconds,
                    .cpu_seconds = cpu_seconds, .cost = {}, .phases = {}, .rank = rank_, .step = p_.steps_};
  }
  // Runs a host op, alone in the process, and logs it: one of the whole stage, or with `shard`
  // one done for that shard (its lane).
  template <class Fn>
  void host(int layer, const char* op, Fn&& fn, std::optional<size_t> shard = std::nullopt) {
    std::unique_lock alone(p_.timing_);
    const auto start = Clock::now();
    const double cpu = thread_cpu_seconds();
    fn();
    const double seconds = since(start), cpu_seconds = thread_cpu_seconds() - cpu;
    alone.unlock();
    if (shard)
      shard_log_[*shard].push_back(
          host_record(layer, op, start, seconds, cpu_seconds, st_.shards[*shard].backend->name()));
    else
      log_.push_back(host_record(layer, op, start, seconds, cpu_seconds));
  }
  double since_epoch(Clock::time_point t) const { return std::chrono::duration<double>(t - p_.epoch_).count(); }

  Pipeline& p_;
  const Gpt2Config& cfg_;
  const StageShards& st_;
  const size_t s_;
  Microbatch& m_;
  std::vector<OpRecord>& log_;  // the stage's records; shard_log_ is appended to it at the end
  const uint32_t rows_;
  const int rank_;
  std::vector<float> h_;                          // the normalized residual stream
  std::vector<size_t> mine_;                      // the shards this process runs
  std::vector<std::vector<float>> part_;          // [shard]: its partial sum of a projection
  std::vector<std::vector<OpRecord>> shard_log_;  // [shard]: its records, kept apart while threads run
};

void Pipeline::run_stage(size_t stage, Microbatch& m, std::vector<OpRecord>& log) {
  if (programs_[stage]) return run_program(stage, m, log);
  StageRun(*this, stage, m, log).run();
}

void Pipeline::run_program(size_t stage, Microbatch& m, std::vector<OpRecord>& log) {
  const auto& shards = stages_[stage].shards;
  const bool first = stage == 0, last = stage + 1 == stages_.size();
  const bool from_device = fed_[stage], to_device = !last && fed_[stage + 1];
  std::vector<float> x_out(last || to_device ? 0 : uint64_t{m.batch} * m.seq * model_.cfg.width);
  if (on_layer) on_layer(stage, stages_[stage].first, m.index);
  std::unique_lock alone(timing_);  // timed by the wall clock
  std::vector<MatmulStats> before;
  for (const Shard& sh : shards) {
    before.push_back(sh.backend->stats());
    sh.backend->take_phases();  // what came before (weights uploaded at start) is not this step's
  }
  const auto start = Clock::now();
  programs_[stage]->step(m.index, first ? m.tokens : nullptr, first || from_device ? nullptr : m.x.data(), m.seq,
                         m.past, m.last_only, last ? m.logits : to_device ? nullptr : x_out.data());
  const double seconds = since(start);
  for (size_t i = 0; i < shards.size(); ++i) {
    MatmulBackend& b = *shards[i].backend;
    OpRecord rec{.stage = static_cast<int>(stage), .layer = -1, .microbatch = m.index, .device = b.name(),
                 .lane = {}, .op = "stage", .start = std::chrono::duration<double>(start - epoch_).count(),
                 .seconds = seconds, .cpu_seconds = 0, .cost = b.stats() - before[i], .phases = {},
                 .rank = comm_ ? comm_->rank() : 0, .step = steps_};
    for (const Phase& ph : b.take_phases())
      rec.phases.push_back({ph.track, ph.name, std::chrono::duration<double>(ph.start - epoch_).count(), ph.seconds});
    log.push_back(std::move(rec));
  }
  if (!last) m.x = std::move(x_out);  // empty where the next stage was fed on its devices
}

std::vector<float> forward(const Gpt2Model& model, std::span<const int32_t> tokens, uint32_t batch, uint32_t seq,
                           MatmulBackend& backend) {
  const Gpt2Config& cfg = model.cfg;
  StageShards all{0, cfg.layers - 1, {Shard{&backend, 0, cfg.heads, 0, 4 * cfg.width, 0, cfg.vocab}}};
  return Pipeline(model, {all}).forward(tokens, batch, seq);
}

Numerics compare_logits(std::span<const float> got, std::span<const float> ref, uint32_t vocab) {
  if (got.size() != ref.size() || vocab == 0 || ref.size() % vocab)
    throw std::invalid_argument(fmt::format("logits of {} and {} values for a vocabulary of {}", got.size(), ref.size(), vocab));
  Numerics n;
  double diff = 0, norm = 0, dot = 0, norm_got = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double g = got[i], r = ref[i];
    n.max_abs_err = std::max(n.max_abs_err, std::abs(g - r));
    diff += (g - r) * (g - r);
    norm += r * r;
    norm_got += g * g;
    dot += g * r;
  }
  n.rel_l2 = norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
  n.cosine = norm > 0 && norm_got > 0 ? dot / std::sqrt(norm * norm_got) : (diff == 0 ? 1.0 : 0.0);
  const size_t rows = ref.size() / vocab;
  size_t agree = 0;
  for (size_t r = 0; r < rows; ++r) {
    const auto g = got.subspan(r * vocab, vocab), f = ref.subspan(r * vocab, vocab);
    agree += std::max_element(g.begin(), g.end()) - g.begin() == std::max_element(f.begin(), f.end()) - f.begin();
  }
  n.top1_agreement = double(agree) / double(rows);
  return n;
}

}  // namespace tessera
