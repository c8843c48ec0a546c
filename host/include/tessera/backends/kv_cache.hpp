// The keys and values one shard keeps for one layer, so that decoding a token attends to the
// tokens before it without recomputing them: `batch` sequences x `heads` heads x up to `capacity`
// positions x `head_dim`. This one holds them in fp32 in host memory; a backend that keeps them on
// its device derives from it (MatmulBackend::make_kv_cache).
#pragma once

#include <cstdint>
#include <vector>

namespace tessera {

class KvCache {
 public:
  KvCache(uint32_t batch, uint32_t heads, uint32_t head_dim, uint32_t capacity, bool on_host = true)
      : batch(batch), heads(heads), head_dim(head_dim), capacity(capacity),
        k_(on_host ? size() : 0), v_(on_host ? size() : 0) {}
  virtual ~KvCache() = default;
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  // The bytes one cache of this shape takes in fp32 (keys and values).
  static uint64_t fp32_bytes(uint32_t batch, uint32_t heads, uint32_t head_dim, uint32_t capacity) {
    return 2 * 4 * uint64_t{batch} * heads * head_dim * capacity;
  }
  // What it holds on its device (host memory for this one).
  virtual uint64_t bytes() const { return fp32_bytes(batch, heads, head_dim, capacity); }

  // Positions [0, capacity) of sequence `seq`, head `head`: row p is position p.
  float* keys(uint32_t seq, uint32_t head) { return &k_[offset(seq, head)]; }
  float* values(uint32_t seq, uint32_t head) { return &v_[offset(seq, head)]; }

  const uint32_t batch, heads, head_dim, capacity;
  uint32_t length = 0;  // positions filled, the same in every sequence

 private:
  uint64_t size() const { return uint64_t{batch} * heads * head_dim * capacity; }
  uint64_t offset(uint32_t seq, uint32_t head) const { return (uint64_t{seq} * heads + head) * capacity * head_dim; }
  std::vector<float> k_, v_;
};

}  // namespace tessera
