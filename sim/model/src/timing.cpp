// The timing model: a cycle-level simulation of the engine's control path, without data.
//
// The engine's speed is set by a handful of coupled loops: bursts in flight against the memory's
// latency, the two loaders taking turns on one read port, ping-pong slots that the array frees
// only when it is done with them, the tile interval, and a store unit whose row buffer, write
// responses and credits push back on the sequencer. Closed formulas for each regime were off by
// 10-50% at the regime boundaries, so this model instead steps the same state machines as the RTL
// (tsr_ctrl, tsr_loader, tsr_axi_rd, tsr_seq, tsr_store and the platform's AXI memory), with the
// same registers and the same one-cycle handshake delays, and reproduces the RTL's busy counter.
//
// It stays cheap (a few thousand steps for a GEMM of a million cycles) by not stepping cycles in
// which nothing happens, and by computing ahead what depends on nothing else:
//  - Everything that evolves on its own (operand streaming, the tile gap, the token chain, read
//    data, bandwidth credit) is kept as absolute cycle numbers. A cycle in which no handshake or
//    state change is due (quiet()) is followed by like cycles up to the earliest of those numbers
//    (wake()), and the loop jumps there. Sequencer events that nothing waits for at the moment are
//    applied when a later cycle is stepped (catch_up()).
//  - A burst's data beats are scheduled when its address is accepted: the read channel is a FIFO
//    whose only other input is the bandwidth credit.
//  - The store unit is never stepped: its input is the rows the sequencer hands it, known when
//    their tile starts, and its only outputs are credits back to the sequencer and being idle at
//    the end, so each row's take, address, data and response cycles are computed then.
//  - The loaders' long runs of requests are played ahead on the read port (run_train()) up to the
//    next point where a slot release could change who requests.
// detail::estimate_every_cycle steps every cycle instead, which the unit tests compare against.
#include <algorithm>
#include <array>
#include <bit>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "tessera/model/timing.hpp"

namespace tessera {

namespace {

constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();
// The RTL's microarchitecture, from the spec (rtl/spec/tessera.toml [microarch]).
using spec::kEpilogueLatency, spec::kInfoDepth, spec::kMaxBurstBeats, spec::kMaxWrites, spec::kPageBytes;

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// tsr_int_pkg::resident_a: no C_in, not BF16 (whose A rows' blocks the scratchpad keeps per slot),
// and ceil(M / R) row blocks fit in an A bank (2 k_max bytes) at a pitch of the row's beats rounded
// up to a power of two.
bool resident_a(bool accumulate, bool bf16, uint64_t m, uint64_t row_beats, const EngineConfig& cfg) {
  const uint64_t bank_beats = 2 * uint64_t{cfg.k_max} / cfg.axi_bytes;
  return !accumulate && !bf16 &&
         ceil_div(m, cfg.rows) <= bank_beats >> std::bit_width(std::max<uint64_t>(row_beats, 1) - 1);
}

// tsr_int_pkg::a_quad: BF16 tiles whose A rows fit in a quarter of a bank (k_max / 2 bytes) ring
// through four A slots, so that the A loader, which needs a beat per cycle for them, runs two tiles
// ahead; the others ping-pong between two. A tile's C_in slot is its A slot's low bit.
uint8_t a_slots(bool bf16, uint64_t row_beats, const EngineConfig& cfg) {
  return bf16 && row_beats <= uint64_t{cfg.k_max} / 2 / cfg.axi_bytes ? 4 : 2;
}

// A small FIFO of trivially copyable values; capacity a power of two, overflow is a model bug.
template <class T, uint32_t N>
class Ring {
  static_assert((N & (N - 1)) == 0);

 public:
  bool empty() const { return head_ == tail_; }
  uint32_t size() const { return tail_ - head_; }
  T& front() { return buf_[head_ % N]; }
  const T& operator[](uint32_t i) const { return buf_[(head_ + i) % N]; }
  const T& front() const { return buf_[head_ % N]; }
  void pop() { ++head_; }
  void push(const T& v) {
    if (size() == N) throw std::logic_error("timing model: internal queue overflow");
    buf_[tail_++ % N] = v;
  }

 private:
  std::array<T, N> buf_{};
  uint32_t head_ = 0, tail_ = 0;
};

// Read destinations (tsr_int_pkg's DEST_*), as far as timing cares.
enum class Dest : uint8_t { kDesc, kA, kB, kCin, kTable };

// One request to the read master (tsr_loader -> tsr_axi_rd).
struct ReadReq {
  uint64_t addr = 0;  // beat-aligned
  uint32_t beats = 0;
  Dest dest = Dest::kDesc;
  uint8_t slot = 0;
  bool fill = false;  // its last beat completes the slot (the tag's `last` bit)
};

// The last beat of a request whose tag completes a slot (or the descriptor): the cycle it is on
// the R channel, which makes the slot full at the next edge.
struct Fill {
  uint64_t at;
  Dest dest;
  uint8_t slot;
};

// An AXI data channel of the memory model (R or W): one beat per cycle at most, each spending a
// beat's worth of bandwidth credit, which grows by bytes_per_cycle each cycle up to two beats
// (AxiMemory::tick). `schedule` returns the cycle of the last of `beats` beats whose first may go
// at cycle `ready` (and every later one on the next cycle), after all beats scheduled before.
class BeatChannel {
 public:
  BeatChannel(int64_t beat, int64_t per_cycle) : beat_(beat), bpc_(per_cycle), cap_(2 * beat) {}

  uint64_t schedule(uint64_t ready, uint32_t beats) {
    if (bpc_ >= beat_) {  // the full bus: credit never runs short
      prev_ = (any_ ? std::max(ready, prev_ + 1) : ready) + beats - 1;
      any_ = true;
      return prev_;
    }
    for (uint32_t b = 0; b < beats; ++b) {
      uint64_t at;
      int64_t credit;
      if (!any_) {
        at = ready;
        credit = cap_;  // idle since long before: full
      } else {
        const uint64_t e0 = prev_ + 1;  // the edge that takes the previous beat
        const int64_t c0 = std::min(cap_, credit_ - beat_ + bpc_);
        const uint64_t wait = c0 >= beat_ ? 0 : ceil_div(static_cast<uint64_t>(beat_ - c0), bpc_);
        at = std::max(ready, e0 + wait);
        credit = std::min<int64_t>(cap_, c0 + static_cast<int64_t>(at - e0) * bpc_);
      }
      any_ = true;
      prev_ = at;
      credit_ = credit;
    }
    return prev_;
  }

 private:
  const int64_t beat_, bpc_, cap_;
  bool any_ = false;
  uint64_t prev_ = 0;   // the cycle of the latest beat
  int64_t credit_ = 0;  // the credit at that cycle's edge, before the beat takes its share
};

// Per started tile: when its operand tokens reach the points that release slots, start the
// readout, and leave the epilogue (tsr_seq's token chain and readout, as absolute cycles).
struct SlotEvent {
  uint64_t at;
  uint8_t slot;
};
struct TileEndEvent {
  uint64_t at;  // the tile's last row (valid or not) leaves the epilogue
  uint8_t cslot, pslot;
  bool nblast, final_tile;
};

class EngineSim {
 public:
  EngineSim(const Descriptor& d, const EngineConfig& cfg, const MemoryModelConfig& mem, bool skip)
      : d_(d),
        cfg_(cfg),
        rows_(cfg.rows),
        cols_(cfg.cols),
        k_(d.k),
        beat_(cfg.axi_bytes),
        lat_(mem.latency),
        read_limit_(std::min(cfg.max_reads, mem.max_reads)),
        write_limit_(std::min(kMaxWrites, mem.max_writes)),
        w_first_(mem.w_first),
        seg4_(cfg.cols * 4 <= cfg.axi_bytes ? 1 : cfg.cols * 4 / cfg.axi_bytes),
        row_beats_(static_cast<uint32_t>(ceil_div(uint64_t{d.k} * d.in_bytes(), cfg.axi_bytes))),
        pair_(d.bf16() && d.has(spec::desc::FLAG_ACCUMULATE) && d.has(spec::desc::FLAG_BIAS)),
        gap_(pair_ ? std::max<uint64_t>({d.k, 2 * cfg.rows + 2, cfg.rows + cfg.cols - 1})
                   : std::max<uint64_t>({d.k, cfg.rows, cfg.cols + (d.has(spec::desc::FLAG_FOLD) ? cfg.rows / 2 : 0)})),
        acc_(d.has(spec::desc::FLAG_ACCUMULATE)),
        a_resident_(resident_a(acc_, d.bf16(), d.m, row_beats_, cfg)),  // a NOP's K = 0 counts as one beat
        a_slots_(a_slots(d.bf16(), row_beats_, cfg)),
        fold_(d.has(spec::desc::FLAG_FOLD)),
        blk_(fold_ ? 2 * cfg.cols : cfg.cols),
        bias_(d.has(spec::desc::FLAG_BIAS)),
        int8_(d.int8_out()),
        gemm_(static_cast<spec::Opcode>(d.opcode) == spec::Opcode::kGemm),
        skip_(skip),
        r_chan_(cfg.axi_bytes, mem.bytes_per_cycle ? mem.bytes_per_cycle : cfg.axi_bytes),
        w_chan_(cfg.axi_bytes, mem.bytes_per_cycle ? mem.bytes_per_cycle : cfg.axi_bytes),
        beat_shift_(static_cast<uint32_t>(std::countr_zero(cfg.axi_bytes))) {}

  TimingEstimate run();

 private:
  enum class Ctrl { kFetch, kWaitDesc, kDecode, kCheck, kRun, kComplete, kDone };
  enum class Lb { kIdle, kWait, kMult, kShift, kBias, kRows };
  enum class La { kIdle, kWait, kRows, kCin };

  void step();
  void catch_up(uint64_t t);
  bool quiet(uint64_t t);
  uint64_t wake() const;
  uint32_t cur_vr() const { return static_cast<uint32_t>(std::min<uint64_t>(rows_, sq_rows_left_)); }
  // The rows the next tile hands the store unit: with FOLD, the lower band's too if it has columns.
  uint32_t cur_rows() const { return fold_ && sq_cols_left_ > cols_ ? 2 * cur_vr() : cur_vr(); }
  bool tiles_left() const { return sq_running_ && sq_cols_left_ != 0; }
  // Whether the next tile waits for its A slot and releases it: all but a resident A's later column blocks.
  bool a_waits() const { return !a_resident_ || sq_cols_blk_ == 0; }
  bool can_start_tile(uint64_t t) const;
  // The cycle from which the next burst may start: the one after burst n - read_limit_'s last beat.
  uint64_t read_slot_at() const { return rd_last_[(rd_bursts_ - read_limit_) & kReadRing] + 1; }
  bool read_slot_free(uint64_t t) const {
    return rd_bursts_ < read_limit_ || read_slot_at() <= t;
  }
  uint64_t issue_burst(uint64_t t, uint32_t beats);
  uint32_t burst_beats() const {  // tsr_axi_rd: the next burst of ax_
    const uint64_t page_left = (kPageBytes - ax_.addr % kPageBytes) >> beat_shift_;
    return static_cast<uint32_t>(std::min<uint64_t>({ax_.beats, page_left, kMaxBurstBeats}));
  }
  bool lb_valid() const { return lb_ == Lb::kMult || lb_ == Lb::kShift || lb_ == Lb::kBias || lb_ == Lb::kRows; }
  bool la_valid() const { return la_ == La::kRows || la_ == La::kCin; }
  // Whether the request the loader presents now is the last before it waits for a slot.
  bool lb_last() const { return lb_ == Lb::kRows && lb_k_ == k_ - 1; }
  bool la_last() const {
    return la_i_ + 1 == std::min(rows_, la_rows_left_) && (la_ == La::kCin || (la_ == La::kRows && !acc_));
  }
  bool lb_blocked() const;
  bool la_blocked() const;
  void lb_granted();
  void la_granted();
  void run_train(uint64_t t);
  void take_credits(uint64_t t);
  void store_row(uint64_t out, uint64_t addr, uint64_t bytes);
  ReadReq lb_request() const;
  ReadReq la_request() const;
  void start_gemm();
  void start_tile(uint64_t t);

  // configuration
  const Descriptor& d_;
  const EngineConfig& cfg_;
  const uint64_t rows_, cols_, k_, beat_, lat_;
  const uint32_t read_limit_, write_limit_, seg4_, row_beats_;
  const bool w_first_;  // the memory takes write data before the burst's address
  // BF16 with C_in and a bias: the readout takes a row every other cycle (the epilogue's one adder
  // per lane adds both), and tiles are max(K, 2R + 2, R + C - 1) apart
  const bool pair_;
  const uint64_t gap_;  // the tile interval max(K, R, C); max(K, R, C + R/2) with FOLD; pair_'s above
  const bool acc_;
  // Resident A (no C_in, and every row block fits in the A banks): the first column block's tiles
  // load A as usual, each row block at its own place, and the later ones read it again.
  const bool a_resident_;
  const uint8_t a_slots_;  // 4 quarter-bank A slots for short BF16 rows, else 2 (a_slots)
  // FOLD: a tile is one row block against blk_ = 2C columns, the lower band of rows taking the second C.
  const bool fold_;
  const uint64_t blk_;
  const bool bias_, int8_, gemm_, skip_;
  BeatChannel r_chan_, w_chan_;
  const uint32_t beat_shift_;

  uint64_t now_ = 0;
  uint64_t stall_ = 0, read_beats_ = 0, write_bytes_ = 0, tiles_ = 0;

  Ctrl ctrl_ = Ctrl::kFetch;

  // memory: the data channels; for the read bursts, the cycle of each one's last beat (kept for
  // the latest read_limit_ bursts: burst n may not start before burst n - read_limit_ has ended,
  // which is both tsr_axi_rd's track FIFO and the memory's read queue), and the fills to come.
  static constexpr uint64_t kReadRing = 255;  // read_limit_ <= max_reads, an 8-bit field of CFG_MEM
  std::array<uint64_t, kReadRing + 1> rd_last_{};
  uint64_t rd_bursts_ = 0;
  Ring<Fill, 64> fills_;
  uint64_t train_end_ = 0;  // a train of one loader's requests owns the read port until this cycle

  // tsr_axi_rd: the request being split into bursts
  bool ax_busy_ = false;
  ReadReq ax_;

  // tsr_loader
  bool rr_ = false;  // the A loader goes first
  Lb lb_ = Lb::kIdle;
  uint64_t lb_nb_ = 0, lb_cols_left_ = 0, lb_k_ = 0;
  La la_ = La::kIdle;
  uint8_t la_tile_ = 0;
  uint64_t la_rows_left_ = 0, la_cols_left_ = 0, la_i_ = 0, la_mb_ = 0, la_nb_ = 0;
  uint8_t a_busy_ = 0, b_busy_ = 0, p_busy_ = 0, c_busy_ = 0, a_full_ = 0, b_full_ = 0, c_full_ = 0;

  // tsr_seq
  bool sq_running_ = false, sq_done_ = false;
  uint8_t sq_tile_ = 0;
  uint64_t sq_cols_blk_ = 0, sq_rows_left_ = 0, sq_cols_left_ = 0, sq_mb_ = 0;
  uint64_t sq_next_start_ = 0;  // first cycle with the array free and the gap elapsed
  uint32_t sq_credits_ = 0, sq_info_ = 0;
  Ring<SlotEvent, 16> ev_arel_, ev_brel_;
  Ring<uint64_t, 16> ev_ro_;
  Ring<TileEndEvent, 16> ev_end_;
  uint64_t final_end_ = kNever;  // the last tile's end event: the GEMM is done after it
  Ring<uint64_t, 128> takes_;  // cycles the store unit takes rows not yet credited back

  // tsr_store and the memory's write side, as schedules: the first cycle the store unit is free
  // for its next row, the cycles of the latest write responses (burst n waits for the response of
  // burst n - write_limit_), and the cycle from which the unit is idle.
  uint64_t st_free_ = 0, st_idle_ = 0, st_bursts_ = 0;
  std::array<uint64_t, kMaxWrites> st_bvalid_{};
};

ReadReq EngineSim::lb_request() const {
  const uint8_t slot = lb_nb_ & 1;
  const uint64_t align = ~(beat_ - 1);
  switch (lb_) {
    case Lb::kMult: return {(d_.mult_addr + lb_nb_ * cols_ * 4) & align, seg4_, Dest::kTable, slot, false};
    case Lb::kShift: return {(d_.shift_addr + lb_nb_ * cols_) & align, 1, Dest::kTable, slot, false};
    case Lb::kBias: return {(d_.bias_addr + lb_nb_ * cols_ * 4) & align, seg4_, Dest::kTable, slot, false};
    case Lb::kRows:
      return {(d_.b_addr + lb_nb_ * blk_ * d_.in_bytes() + lb_k_ * d_.ldb) & align, 1, Dest::kB, slot, lb_k_ == k_ - 1};
    default: return {};
  }
}

ReadReq EngineSim::la_request() const {
  const uint64_t align = ~(beat_ - 1), row = la_mb_ * rows_ + la_i_;
  const bool last = la_i_ + 1 == std::min(rows_, la_rows_left_);
  if (la_ == La::kRows) return {(d_.a_addr + row * d_.lda) & align, row_beats_, Dest::kA, la_tile_, last};
  if (la_ == La::kCin)
    return {(d_.cin_addr + row * d_.ldcin + la_nb_ * cols_ * 4) & align, seg4_, Dest::kCin, uint8_t(la_tile_ & 1), last};
  return {};
}

// The B loader's request was granted: tables, then K rows, then wait for the next block's slot.
void EngineSim::lb_granted() {
  switch (lb_) {
    case Lb::kMult: lb_ = Lb::kShift; break;
    case Lb::kShift: lb_ = bias_ ? Lb::kBias : Lb::kRows; break;
    case Lb::kBias: lb_ = Lb::kRows; break;
    case Lb::kRows:
      if (lb_k_ == k_ - 1) {
        lb_ = Lb::kWait;
        ++lb_nb_;
        lb_cols_left_ = lb_cols_left_ > blk_ ? lb_cols_left_ - blk_ : 0;
      }
      ++lb_k_;
      break;
    default: break;
  }
}

// The A loader's request was granted: the tile's A rows, its C_in rows, then the next tile (row
// blocks inner) once its slot is free.
void EngineSim::la_granted() {
  const bool row_last = la_i_ + 1 == std::min(rows_, la_rows_left_);
  ++la_i_;
  if (row_last && la_ == La::kRows && acc_) {
    la_ = La::kCin;
    la_i_ = 0;
  } else if (row_last && a_resident_ && la_rows_left_ <= rows_) {
    la_ = La::kIdle;  // the whole of A is in
  } else if (row_last) {
    la_ = La::kWait;
    la_tile_ = uint8_t((la_tile_ + 1) % a_slots_);
    if (la_rows_left_ <= rows_) {
      la_rows_left_ = d_.m;
      la_cols_left_ = la_cols_left_ > cols_ ? la_cols_left_ - cols_ : 0;
      la_mb_ = 0;
      ++la_nb_;
    } else {
      la_rows_left_ -= rows_;
      ++la_mb_;
    }
  }
}

void EngineSim::start_gemm() {
  lb_ = Lb::kWait;
  lb_nb_ = 0;
  lb_cols_left_ = d_.n;
  la_ = La::kWait;
  la_tile_ = 0;
  la_rows_left_ = d_.m;
  la_cols_left_ = d_.n;
  la_mb_ = la_nb_ = 0;
  sq_running_ = true;
  sq_tile_ = 0;
  sq_rows_left_ = d_.m;
  sq_cols_left_ = d_.n;
  sq_cols_blk_ = sq_mb_ = 0;
  sq_next_start_ = 0;
  sq_credits_ = static_cast<uint32_t>(spec::kStoreRowsPerArrayRow * rows_);  // the store unit's row FIFO
}

bool EngineSim::can_start_tile(uint64_t t) const {
  const uint8_t bslot = sq_cols_blk_ & 1;
  return tiles_left() && t >= sq_next_start_ && (((a_full_ >> sq_tile_) & 1) || !a_waits()) && ((b_full_ >> bslot) & 1) &&
         (!acc_ || ((c_full_ >> (sq_tile_ & 1)) & 1)) && sq_credits_ >= cur_rows() && sq_info_ < kInfoDepth;
}

// The memory accepts a burst's address in cycle t; returns the cycle of its last data beat.
uint64_t EngineSim::issue_burst(uint64_t t, uint32_t beats) {
  read_beats_ += beats;
  const uint64_t last = r_chan_.schedule(t + 1 + lat_, beats);
  rd_last_[rd_bursts_++ & kReadRing] = last;
  return last;
}

// A loader that waits for a slot makes no request until the sequencer releases one.
bool EngineSim::la_blocked() const {
  return la_ == La::kIdle ||
         (la_ == La::kWait &&
          (la_cols_left_ == 0 || ((a_busy_ >> la_tile_) & 1) || (acc_ && ((c_busy_ >> (la_tile_ & 1)) & 1))));
}
bool EngineSim::lb_blocked() const {
  return lb_ == Lb::kIdle ||
         (lb_ == Lb::kWait && (lb_cols_left_ == 0 || (((b_busy_ | p_busy_) >> (lb_nb_ & 1)) & 1)));
}

// While the loaders keep requesting, the read port's cycles follow from the requests alone: each
// burst's address goes at the first cycle after the previous one (or after the grant) with a burst
// slot free, and the cycle of a request's last burst grants the next request, by round robin among
// the loaders that request. Requests come in long runs (the B panel's K one-beat rows, a tile's A
// and C_in rows), so this plays them ahead without stepping cycles. Called in cycle t, which
// granted the request now in ax_, it stops
//  - before a loader's last request of its run is granted: after that grant the loader waits for a
//    slot, and its claim must happen in step(), in its cycle;
//  - if a loader waits for a slot, before the earliest cycle a release could end the wait: a release
//    already scheduled, or one of a tile that starts later, which is at least K + min(R, C) cycles
//    away.
// Fills of the requests played ahead are queued like any other; the read port's state is the one
// the cycle-level loop reaches at train_end_, and other events in between are still stepped.
void EngineSim::run_train(uint64_t t) {
  const bool la_waits = la_ == La::kWait && la_cols_left_ != 0;
  const bool lb_waits = lb_ == Lb::kWait && lb_cols_left_ != 0;
  if ((la_waits && !la_blocked()) || (lb_waits && !lb_blocked())) return;  // it claims a slot next
  uint64_t stop = kNever;
  if (la_waits || lb_waits) {
    stop = t + k_ + std::min(rows_, cols_);
    if (!ev_arel_.empty()) stop = std::min(stop, ev_arel_.front().at);
    if (!ev_brel_.empty()) stop = std::min(stop, ev_brel_.front().at);
    if (!ev_end_.empty()) stop = std::min(stop, ev_end_.front().at);
  }
  uint64_t last = t;  // the latest cycle played: a grant or an address handshake
  for (;;) {
    const bool a = la_valid() && (rr_ || !lb_valid());  // who the next grant goes to
    if (a ? la_last() : !lb_valid() || lb_last()) break;
    do {
      const uint32_t burst = burst_beats();
      const uint64_t ar = rd_bursts_ < read_limit_ ? last + 1 : std::max(last + 1, read_slot_at());
      if (ar >= stop) {
        if (last != t) train_end_ = last + 1;
        return;
      }
      const uint64_t end = issue_burst(ar, burst);
      if (burst == ax_.beats && ax_.fill) fills_.push({end, ax_.dest, ax_.slot});
      ax_.addr += burst * beat_;
      ax_.beats -= burst;
      last = ar;
    } while (ax_.beats != 0);
    if (a) {  // granted in the cycle of the last address
      ax_ = la_request();
      la_granted();
      rr_ = false;
    } else {
      ax_ = lb_request();
      lb_granted();
      rr_ = true;
    }
  }
  // The next grant stays with step(), at ax_'s last address.
  if (last != t) train_end_ = last + 1;
}

// Credits come back the cycle after the store unit takes a row.
void EngineSim::take_credits(uint64_t t) {
  while (!takes_.empty() && takes_.front() < t) {
    ++sq_credits_;
    takes_.pop();
  }
}

// tsr_store, for one row that leaves the epilogue in cycle `out`: it enters the row FIFO at the
// next edge, is taken once the unit is free, and is written as one burst, or two where it crosses
// a 4 KB page. A burst's address goes the cycle after the take (or after the first burst's data)
// once fewer than write_limit_ bursts await their response; its data beats follow from the next
// cycle (w_first: from the address's first cycle on, whether or not it was taken); the unit takes
// its next row in the cycle the row's last beat and address are both gone; the response is valid
// `latency` cycles after the edge that takes the later of the two, and is taken at once.
void EngineSim::store_row(uint64_t out, uint64_t addr, uint64_t bytes) {
  const uint64_t take = std::max(out + 1, st_free_);
  takes_.push(take);
  write_bytes_ += bytes;
  const uint64_t lane = addr & (beat_ - 1);
  const uint64_t beats = (lane + bytes + beat_ - 1) >> beat_shift_;
  const uint64_t page_beats = (kPageBytes - (addr - lane) % kPageBytes) >> beat_shift_;
  const uint64_t first = std::min(page_beats, beats);
  uint64_t ready = take + 1, last = 0;
  for (const uint64_t n : {first, beats - first}) {
    if (n == 0) break;
    // the response of burst n - write_limit_, which burst n waits for
    const uint64_t aw =
        st_bursts_ >= write_limit_ ? std::max(ready, st_bvalid_[(st_bursts_ - write_limit_) % kMaxWrites] + 1) : ready;
    last = std::max(aw, w_chan_.schedule(w_first_ ? ready : aw + 1, static_cast<uint32_t>(n)));
    const uint64_t prev = st_bursts_ ? st_bvalid_[(st_bursts_ - 1) % kMaxWrites] : 0;
    st_bvalid_[st_bursts_ % kMaxWrites] = std::max(last + 1 + lat_, prev + 1);
    ++st_bursts_;
    ready = last + 1;
  }
  st_free_ = last;
  st_idle_ = std::max(last + 1, st_bvalid_[(st_bursts_ - 1) % kMaxWrites] + 1);
}

// A tile's first operand token leaves in cycle t, its last (k = K-1) in T = t + K - 1. Stage s of
// the token chain holds a token s + 1 cycles after it left: the A slot is free after stage R-1,
// the B slot after stage C-1 (for the column block's last tile), the readout starts at stage C+4
// and reads a row a cycle (every other cycle for a BF16 GEMM with C_in and a bias); each row then
// takes one cycle to the epilogue and its stages.
void EngineSim::start_tile(uint64_t t) {
  const uint64_t T = t + k_ - 1;
  const uint32_t vr = cur_vr();
  const uint32_t stored = cur_rows();
  const uint64_t vc = std::min<uint64_t>(blk_, sq_cols_left_);
  const uint8_t bslot = sq_cols_blk_ & 1;
  const bool nblast = sq_rows_left_ <= rows_;
  const bool final_tile = nblast && sq_cols_left_ <= blk_;
  const uint64_t out_bytes = d_.out_bytes();
  const uint64_t c_addr = d_.c_addr + sq_cols_blk_ * blk_ * out_bytes + sq_mb_ * rows_ * d_.ldc;
  const uint64_t readout = T + cols_ + 5, out = readout + 1 + kEpilogueLatency, pitch = pair_ ? 2 : 1;
  if (a_waits()) ev_arel_.push({T + rows_, sq_tile_});
  if (nblast) ev_brel_.push({T + cols_, bslot});
  ev_ro_.push(readout);
  for (uint32_t r = 0; r < vr; ++r) store_row(out + pitch * r, c_addr + r * d_.ldc, std::min(vc, cols_) * out_bytes);
  if (fold_ && vc > cols_)  // the lower band's rows, from row R/2 of the readout
    for (uint32_t r = 0; r < vr; ++r)
      store_row(out + rows_ / 2 + r, c_addr + cols_ * out_bytes + r * d_.ldc, (vc - cols_) * out_bytes);
  const uint64_t end = out + pitch * (rows_ - 1);
  ev_end_.push({end, uint8_t(sq_tile_ & 1), bslot, nblast, final_tile});
  if (final_tile) final_end_ = end;

  sq_next_start_ = t + gap_;
  sq_credits_ -= stored;
  ++tiles_;
  ++sq_info_;
  sq_tile_ = uint8_t((sq_tile_ + 1) % a_slots_);
  if (nblast) {
    sq_rows_left_ = d_.m;
    sq_cols_left_ = sq_cols_left_ > blk_ ? sq_cols_left_ - blk_ : 0;
    ++sq_cols_blk_;
    sq_mb_ = 0;
  } else {
    sq_rows_left_ -= rows_;
    ++sq_mb_;
  }
}

// Simulates cycle now_: the combinational signals from the registers, then the registers' next
// values.
void EngineSim::step() {
  const uint64_t t = now_;
  catch_up(t);

  // ---- memory outputs (registered in the memory model)
  const bool fill = !fills_.empty() && fills_.front().at == t;
  const bool port = t >= train_end_;  // else run_train() has played this cycle's requests already

  // ---- tsr_axi_rd
  uint32_t burst = 0;
  bool ar_fire = false, last_burst = false;
  if (ax_busy_ && port) {
    burst = burst_beats();
    last_burst = burst == ax_.beats;
    ar_fire = read_slot_free(t);
  }
  const bool req_ready = port && (!ax_busy_ || (ar_fire && last_burst));

  // ---- tsr_loader's arbiter: a descriptor fetch first, then round robin
  const bool desc_valid = ctrl_ == Ctrl::kFetch;
  const bool pick_a = la_valid() && (rr_ || !lb_valid());
  const bool la_grant = !desc_valid && pick_a && req_ready;
  const bool lb_grant = !desc_valid && !pick_a && lb_valid() && req_ready;
  const bool desc_grant = desc_valid && req_ready;

  // ---- tsr_seq
  take_credits(t);
  const bool go = ctrl_ == Ctrl::kRun && can_start_tile(t);
  uint8_t a_rel = 0, b_rel = 0, c_rel = 0, p_rel = 0;
  bool ro_start = false, tile_end = false, done_now = false;
  if (!ev_arel_.empty() && ev_arel_.front().at == t) a_rel = uint8_t(1u << ev_arel_.front().slot);
  if (!ev_brel_.empty() && ev_brel_.front().at == t) b_rel = uint8_t(1u << ev_brel_.front().slot);
  if (!ev_ro_.empty() && ev_ro_.front() == t) ro_start = true;
  if (!ev_end_.empty() && ev_end_.front().at == t) {
    const TileEndEvent& e = ev_end_.front();
    tile_end = true;
    if (acc_) c_rel = uint8_t(1u << e.cslot);
    if (e.nblast) p_rel = uint8_t(1u << e.pslot);
    done_now = e.final_tile;
  }
  if (ctrl_ == Ctrl::kRun && tiles_left() && t >= sq_next_start_ && !go) ++stall_;

  // ================================================================ next state
  // ---- read side: the last beat of a burst (fills a slot), address handshakes, new requests
  uint8_t a_fill = 0, b_fill = 0, c_fill = 0;
  bool desc_in = false;
  if (fill) {
    const Fill& f = fills_.front();
    switch (f.dest) {
      case Dest::kA: a_fill = uint8_t(1u << f.slot); break;
      case Dest::kB: b_fill = uint8_t(1u << f.slot); break;
      case Dest::kCin: c_fill = uint8_t(1u << f.slot); break;
      case Dest::kDesc: desc_in = true; break;
      case Dest::kTable: break;
    }
    fills_.pop();
  }
  if (ar_fire) {
    const uint64_t last = issue_burst(t, burst);
    if (last_burst && ax_.fill) fills_.push({last, ax_.dest, ax_.slot});
    ax_.addr += burst * beat_;
    ax_.beats -= burst;
    if (last_burst) ax_busy_ = false;
  }
  if (desc_grant) {
    ax_ = {0, static_cast<uint32_t>(spec::kDescBytes / beat_), Dest::kDesc, 0, true};
    ax_busy_ = true;
  } else if (la_grant) {
    ax_ = la_request();
    ax_busy_ = true;
  } else if (lb_grant) {
    ax_ = lb_request();
    ax_busy_ = true;
  }
  if (la_grant) rr_ = false;
  if (lb_grant) rr_ = true;

  // ---- tsr_loader: the two request generators and the slot flags
  uint8_t a_claim = 0, b_claim = 0, c_claim = 0;
  switch (lb_) {
    case Lb::kWait:
      if (lb_cols_left_ == 0) {
        lb_ = Lb::kIdle;
      } else if (!((b_busy_ | p_busy_) >> (lb_nb_ & 1) & 1)) {
        b_claim = uint8_t(1u << (lb_nb_ & 1));
        lb_k_ = 0;
        lb_ = int8_ ? Lb::kMult : (bias_ ? Lb::kBias : Lb::kRows);
      }
      break;
    default:
      if (lb_grant) lb_granted();
      break;
  }
  switch (la_) {
    case La::kWait:
      if (la_cols_left_ == 0) {
        la_ = La::kIdle;
      } else if (!((a_busy_ >> la_tile_) & 1) && !(acc_ && ((c_busy_ >> (la_tile_ & 1)) & 1))) {
        a_claim = uint8_t(1u << la_tile_);
        if (acc_) c_claim = uint8_t(1u << (la_tile_ & 1));
        la_i_ = 0;
        la_ = La::kRows;
      }
      break;
    default:
      if (la_grant) la_granted();
      break;
  }
  a_busy_ = (a_busy_ | a_claim) & ~a_rel;
  b_busy_ = (b_busy_ | b_claim) & ~b_rel;
  p_busy_ = (p_busy_ | b_claim) & ~p_rel;
  c_busy_ = (c_busy_ | c_claim) & ~c_rel;
  a_full_ = (a_full_ | a_fill) & ~a_rel;
  b_full_ = (b_full_ | b_fill) & ~b_rel;
  c_full_ = (c_full_ | c_fill) & ~c_rel;

  // ---- tsr_seq: events, credits, the next tile
  if (a_rel) ev_arel_.pop();
  if (b_rel) ev_brel_.pop();
  if (ro_start) {
    ev_ro_.pop();
    --sq_info_;
  }
  if (tile_end) ev_end_.pop();
  if (go) start_tile(t);
  if (done_now) {
    sq_done_ = true;
    sq_running_ = false;
  }

  // ---- tsr_ctrl
  switch (ctrl_) {
    case Ctrl::kFetch:
      if (desc_grant) ctrl_ = Ctrl::kWaitDesc;
      break;
    case Ctrl::kWaitDesc:
      if (desc_in) ctrl_ = Ctrl::kDecode;
      break;
    case Ctrl::kDecode:
      ctrl_ = Ctrl::kCheck;
      break;
    case Ctrl::kCheck:
      if (gemm_) {
        start_gemm();
        ctrl_ = Ctrl::kRun;
      } else {
        ctrl_ = Ctrl::kComplete;
      }
      break;
    case Ctrl::kRun:
      if (sq_done_ && t >= st_idle_) {
        ctrl_ = Ctrl::kComplete;
      }
      break;
    case Ctrl::kComplete:
      ctrl_ = Ctrl::kDone;
      break;
    case Ctrl::kDone: break;
  }
  if (skip_ && (la_grant || lb_grant)) run_train(t);
  ++now_;
}

// Sequencer events of cycles before t that were not stepped (no one waited for them): their effect,
// as the registers hold it from the cycle after the event on.
void EngineSim::catch_up(uint64_t t) {
  for (; !ev_arel_.empty() && ev_arel_.front().at < t; ev_arel_.pop()) {
    a_busy_ &= ~(1u << ev_arel_.front().slot);
    a_full_ &= ~(1u << ev_arel_.front().slot);
  }
  for (; !ev_brel_.empty() && ev_brel_.front().at < t; ev_brel_.pop()) {
    b_busy_ &= ~(1u << ev_brel_.front().slot);
    b_full_ &= ~(1u << ev_brel_.front().slot);
  }
  for (; !ev_ro_.empty() && ev_ro_.front() < t; ev_ro_.pop()) --sq_info_;
  for (; !ev_end_.empty() && ev_end_.front().at < t; ev_end_.pop()) {
    const TileEndEvent& e = ev_end_.front();
    if (acc_) {
      c_busy_ &= ~(1u << e.cslot);
      c_full_ &= ~(1u << e.cslot);
    }
    if (e.nblast) p_busy_ &= ~(1u << e.pslot);
    if (e.final_tile) {
      sq_done_ = true;
      sq_running_ = false;
    }
  }
}

// Whether nothing would happen in cycle t that matters now: no handshake, no state change, no event
// that a loader, the sequencer or the controller waits for. It may say no where the cycle is quiet
// after all (the cycle is then stepped), never the reverse.
bool EngineSim::quiet(uint64_t t) {
  if (ctrl_ != Ctrl::kRun && ctrl_ != Ctrl::kWaitDesc) return false;
  if (!fills_.empty() && fills_.front().at == t) return false;
  if (t >= train_end_ && (ax_busy_ ? read_slot_free(t) : la_valid() || lb_valid())) return false;
  if (lb_ == Lb::kWait && (lb_cols_left_ == 0 || !lb_blocked())) return false;
  if (la_ == La::kWait && (la_cols_left_ == 0 || !la_blocked())) return false;
  if (la_ == La::kWait && ((!ev_arel_.empty() && ev_arel_.front().at == t) || (!ev_end_.empty() && ev_end_.front().at == t)))
    return false;
  if (lb_ == Lb::kWait && ((!ev_brel_.empty() && ev_brel_.front().at == t) || (!ev_end_.empty() && ev_end_.front().at == t)))
    return false;
  if (sq_info_ >= kInfoDepth && !ev_ro_.empty() && ev_ro_.front() == t) return false;
  if (final_end_ == t) return false;
  if (ctrl_ == Ctrl::kRun) {
    take_credits(t);
    if (can_start_tile(t) || (sq_done_ && t >= st_idle_)) return false;
  }
  return true;
}

// The first cycle from now_ on at which a quiet engine may do something: the next scheduled event.
uint64_t EngineSim::wake() const {
  uint64_t w = kNever;
  if (!fills_.empty()) w = std::min(w, fills_.front().at);
  if (now_ < train_end_) {
    w = std::min(w, train_end_);
  } else if (ax_busy_) {  // a burst waiting for a free slot
    w = std::min(w, rd_bursts_ < read_limit_ ? now_ : std::max(now_, read_slot_at()));
  }
  // Sequencer events that something waits for; the others are applied when a later cycle is stepped.
  if (la_ == La::kWait && !ev_arel_.empty()) w = std::min(w, ev_arel_.front().at);
  if (lb_ == Lb::kWait && !ev_brel_.empty()) w = std::min(w, ev_brel_.front().at);
  if ((la_ == La::kWait || lb_ == Lb::kWait) && !ev_end_.empty()) w = std::min(w, ev_end_.front().at);
  if (sq_info_ >= kInfoDepth && !ev_ro_.empty()) w = std::min(w, ev_ro_.front());
  if (!sq_done_) w = std::min(w, final_end_);
  if (ctrl_ == Ctrl::kRun && tiles_left() && sq_next_start_ >= now_) w = std::min(w, sq_next_start_);
  if (ctrl_ == Ctrl::kRun && tiles_left() && sq_credits_ < cur_rows()) {  // credits the next tile needs
    const uint32_t need = cur_rows() - sq_credits_;
    if (need <= takes_.size()) w = std::min(w, takes_[need - 1] + 1);
  }
  if (ctrl_ == Ctrl::kRun && sq_done_) w = std::min(w, st_idle_);
  return std::max(w, now_);
}

TimingEstimate EngineSim::run() {
  while (ctrl_ != Ctrl::kDone) {
    step();
    if (!skip_ || !quiet(now_)) continue;
    const uint64_t w = wake();
    if (w == kNever) throw std::logic_error(fmt::format("timing model: engine stuck at cycle {}", now_));
    // The cycles up to w are all like cycle now_, stalls included.
    if (ctrl_ == Ctrl::kRun && tiles_left() && now_ >= sq_next_start_) stall_ += w - now_;
    now_ = w;
  }
  TimingEstimate e;
  e.cycles = now_;
  e.stall_cycles = stall_;
  e.read_bytes = read_beats_ * beat_;
  e.write_bytes = write_bytes_;
  e.actions = actions_of_tiles(tiles_, d_, cfg_);
  return e;
}

}  // namespace

uint64_t output_stationary_cycles(uint32_t m, uint32_t n, uint32_t k, const EngineConfig& cfg) {
  return ceil_div(m, cfg.rows) * ceil_div(n, cfg.cols) * (uint64_t{k} + cfg.rows + cfg.cols - 2);
}

TimingEstimate estimate(const Descriptor& d, const EngineConfig& cfg, const MemoryModelConfig& mem) {
  if (static_cast<spec::Opcode>(d.opcode) == spec::Opcode::kGemm && (d.m == 0 || d.n == 0 || d.k == 0))
    throw std::invalid_argument("timing model: a GEMM needs M, N and K of at least 1");
  if (std::min(cfg.max_reads, mem.max_reads) - 1 > 255 || mem.max_writes == 0)
    throw std::invalid_argument(fmt::format("timing model: {} read and {} write bursts in flight are out of range",
                                            std::min(cfg.max_reads, mem.max_reads), mem.max_writes));
  return EngineSim(d, cfg, mem, true).run();
}

namespace detail {
TimingEstimate estimate_every_cycle(const Descriptor& d, const EngineConfig& cfg, const MemoryModelConfig& mem) {
  return EngineSim(d, cfg, mem, false).run();
}
}  // namespace detail

}  // namespace tessera
