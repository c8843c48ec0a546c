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
// It stays cheap because it never steps a cycle in which nothing happens. Everything that evolves
// on its own (operand streaming, the tile gap, the token chain, read data, write responses,
// bandwidth credit) is kept as absolute cycle numbers, so a cycle in which no handshake or state
// change occurs is followed by identical cycles up to the earliest of those numbers, and the loop
// jumps there. A burst's data beats are scheduled when its address is accepted (the read channel
// is a FIFO whose only other input is the bandwidth credit), so a multi-beat burst costs one step.
#include <algorithm>
#include <array>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "tessera/timing.hpp"

namespace tessera {

namespace {

constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();
constexpr uint32_t kMaxWrites = 16;        // tsr_top's MaxWrites: write bursts awaiting a response
constexpr uint32_t kInfoDepth = 4;         // tsr_seq's tile info FIFO: tiles started, not yet read out
constexpr uint32_t kEpilogueLatency = 5;   // tsr_epilogue
constexpr uint32_t kPageBytes = 4096;      // AXI bursts never cross this
constexpr uint32_t kMaxBurstBeats = 256;

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// A small FIFO of trivially copyable values; capacity a power of two, overflow is a model bug.
template <class T, uint32_t N>
class Ring {
  static_assert((N & (N - 1)) == 0);

 public:
  bool empty() const { return head_ == tail_; }
  uint32_t size() const { return tail_ - head_; }
  T& front() { return buf_[head_ % N]; }
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

// A burst between its address handshake and its last data beat.
struct ReadBurst {
  uint64_t last_beat;  // the cycle its last beat is on the R channel
  Dest dest;
  uint8_t slot;
  bool fill;  // the last burst of a request whose tag completes a slot
};

// A finished row on its way to the store unit.
struct StoreRow {
  uint32_t beats;      // beats of the whole row
  uint32_t first_end;  // beats of its first burst (less where the row crosses a 4 KB page)
};

// Per started tile: when its operand tokens reach the points that release slots, start the
// readout, and leave the epilogue (tsr_seq's token chain and readout, as absolute cycles).
struct SlotEvent {
  uint64_t at;
  uint8_t slot;
};
struct RowsEvent {
  uint64_t first;   // cycle row 0 leaves the epilogue; row r leaves r cycles later
  uint32_t rows;    // valid rows, the ones that are stored
  uint64_t c_addr;  // row 0's address in C
  uint32_t cols;    // valid columns
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
        rows_(cfg.rows),
        cols_(cfg.cols),
        k_(d.k),
        beat_(cfg.axi_bytes),
        lat_(mem.latency),
        bpc_(mem.bytes_per_cycle ? mem.bytes_per_cycle : cfg.axi_bytes),
        cap_(2 * int64_t{cfg.axi_bytes}),
        read_limit_(std::min(cfg.max_reads, mem.max_reads)),
        write_limit_(std::min(kMaxWrites, mem.max_writes)),
        seg4_(cfg.cols * 4 <= cfg.axi_bytes ? 1 : cfg.cols * 4 / cfg.axi_bytes),
        row_beats_(static_cast<uint32_t>(ceil_div(d.k, cfg.axi_bytes))),
        gap_(std::max<uint64_t>({d.k, cfg.rows, cfg.cols})),
        acc_(d.has(spec::desc::FLAG_ACCUMULATE)),
        bias_(d.has(spec::desc::FLAG_BIAS)),
        int8_(d.int8_out()),
        gemm_(static_cast<spec::Opcode>(d.opcode) == spec::Opcode::kGemm),
        skip_(skip) {}

  TimingEstimate run();

 private:
  enum class Ctrl { kFetch, kWaitDesc, kDecode, kCheck, kRun, kComplete, kDone };
  enum class Lb { kIdle, kWait, kMult, kShift, kBias, kRows };
  enum class La { kIdle, kWait, kRows, kCin };

  bool step();
  uint64_t wake() const;
  uint32_t cur_vr() const { return static_cast<uint32_t>(std::min<uint64_t>(rows_, sq_rows_left_)); }
  bool tiles_left() const { return sq_running_ && sq_cols_left_ != 0; }
  bool can_start_tile(uint64_t t) const;
  uint64_t schedule_burst(uint64_t ready, uint32_t beats);
  int64_t wr_credit(uint64_t t) const {
    return std::min<int64_t>(cap_, wc_val_ + static_cast<int64_t>(t - wc_edge_) * bpc_);
  }
  ReadReq lb_request() const;
  ReadReq la_request() const;
  void start_gemm();
  void start_tile(uint64_t t);

  // configuration
  const Descriptor& d_;
  const uint64_t rows_, cols_, k_, beat_, lat_;
  const int64_t bpc_, cap_;
  const uint32_t read_limit_, write_limit_, seg4_, row_beats_;
  const uint64_t gap_;  // the tile interval max(K, R, C)
  const bool acc_, bias_, int8_, gemm_, skip_;

  uint64_t now_ = 0;
  uint64_t stall_ = 0, read_beats_ = 0, write_bytes_ = 0;

  Ctrl ctrl_ = Ctrl::kFetch;

  // memory, read side: bursts in flight (tsr_axi_rd's track FIFO = the memory's read queue) and
  // the R channel's schedule: the cycle of the latest beat and the credit at that cycle's edge.
  Ring<ReadBurst, 32> rd_;
  bool r_any_ = false;
  uint64_t r_prev_ = 0;
  int64_t r_credit_ = 0;

  // memory, write side: bursts between their address handshake and their response's handshake,
  // the cycles the responses are valid, and the W credit (value at edge wc_edge_).
  uint32_t wr_out_ = 0;
  Ring<uint64_t, 32> resp_;
  uint64_t last_bvalid_ = 0;
  uint64_t wc_edge_ = 0;
  int64_t wc_val_ = 0;

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
  Ring<RowsEvent, 16> ev_rows_;
  uint32_t ev_row_ = 0;  // next row of ev_rows_.front()
  Ring<TileEndEvent, 16> ev_end_;

  // tsr_store
  Ring<StoreRow, 128> st_fifo_;
  bool st_busy_ = false, st_aw_done_ = false;
  uint32_t st_beat_ = 0, st_end_ = 0, st_beats_ = 0;
};

// The R channel serves bursts in order, one beat per cycle at most, each beat spending a beat's
// worth of bandwidth credit (AxiMemory::tick: credit -= beat on a beat, += bytes_per_cycle per
// cycle, capped at two beats). Returns the cycle of the burst's last beat.
uint64_t EngineSim::schedule_burst(uint64_t ready, uint32_t beats) {
  read_beats_ += beats;
  for (uint32_t b = 0; b < beats; ++b) {
    uint64_t at;
    int64_t credit;
    if (!r_any_) {
      at = ready;
      credit = cap_;  // idle since long before: full
    } else {
      const uint64_t e0 = r_prev_ + 1;  // the edge that takes the previous beat
      const int64_t c0 = std::min(cap_, r_credit_ - static_cast<int64_t>(beat_) + bpc_);
      const uint64_t wait = c0 >= static_cast<int64_t>(beat_) ? 0 : ceil_div(beat_ - c0, bpc_);
      at = std::max(ready, e0 + wait);
      credit = std::min<int64_t>(cap_, c0 + static_cast<int64_t>(at - e0) * bpc_);
    }
    r_any_ = true;
    r_prev_ = at;
    r_credit_ = credit;
  }
  return r_prev_;
}

ReadReq EngineSim::lb_request() const {
  const uint8_t slot = lb_nb_ & 1;
  const uint64_t align = ~(beat_ - 1);
  switch (lb_) {
    case Lb::kMult: return {(d_.mult_addr + lb_nb_ * cols_ * 4) & align, seg4_, Dest::kTable, slot, false};
    case Lb::kShift: return {(d_.shift_addr + lb_nb_ * cols_) & align, 1, Dest::kTable, slot, false};
    case Lb::kBias: return {(d_.bias_addr + lb_nb_ * cols_ * 4) & align, seg4_, Dest::kTable, slot, false};
    case Lb::kRows:
      return {(d_.b_addr + lb_nb_ * cols_ + lb_k_ * d_.ldb) & align, 1, Dest::kB, slot, lb_k_ == k_ - 1};
    default: return {};
  }
}

ReadReq EngineSim::la_request() const {
  const uint64_t align = ~(beat_ - 1), row = la_mb_ * rows_ + la_i_;
  const bool last = la_i_ + 1 == std::min(rows_, la_rows_left_);
  if (la_ == La::kRows) return {(d_.a_addr + row * d_.lda) & align, row_beats_, Dest::kA, la_tile_, last};
  if (la_ == La::kCin)
    return {(d_.cin_addr + row * d_.ldcin + la_nb_ * cols_ * 4) & align, seg4_, Dest::kCin, la_tile_, last};
  return {};
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
  sq_credits_ = static_cast<uint32_t>(2 * rows_);  // the store unit's row FIFO
}

bool EngineSim::can_start_tile(uint64_t t) const {
  const uint8_t bslot = sq_cols_blk_ & 1;
  return tiles_left() && t >= sq_next_start_ && ((a_full_ >> sq_tile_) & 1) && ((b_full_ >> bslot) & 1) &&
         (!acc_ || ((c_full_ >> sq_tile_) & 1)) && sq_credits_ >= cur_vr() && sq_info_ < kInfoDepth;
}

// A tile's first operand token leaves in cycle t, its last (k = K-1) in T = t + K - 1. Stage s of
// the token chain holds a token s + 1 cycles after it left: the A slot is free after stage R-1,
// the B slot after stage C-1 (for the column block's last tile), the readout starts at stage C+2
// and reads a row a cycle; each row then takes one cycle to the epilogue and its five stages.
void EngineSim::start_tile(uint64_t t) {
  const uint64_t T = t + k_ - 1;
  const uint32_t vr = cur_vr();
  const uint64_t vc = std::min<uint64_t>(cols_, sq_cols_left_);
  const uint8_t bslot = sq_cols_blk_ & 1;
  const bool nblast = sq_rows_left_ <= rows_;
  const bool final_tile = nblast && sq_cols_left_ <= cols_;
  const uint64_t out_bytes = int8_ ? 1 : 4;
  const uint64_t c_addr = d_.c_addr + sq_cols_blk_ * cols_ * out_bytes + sq_mb_ * rows_ * d_.ldc;
  const uint64_t readout = T + cols_ + 3, out = readout + 1 + kEpilogueLatency;
  ev_arel_.push({T + rows_, sq_tile_});
  if (nblast) ev_brel_.push({T + cols_, bslot});
  ev_ro_.push(readout);
  ev_rows_.push({out, vr, c_addr, static_cast<uint32_t>(vc)});
  ev_end_.push({out + rows_ - 1, sq_tile_, bslot, nblast, final_tile});

  sq_next_start_ = t + gap_;
  sq_credits_ -= vr;
  ++sq_info_;
  sq_tile_ ^= 1;
  if (nblast) {
    sq_rows_left_ = d_.m;
    sq_cols_left_ = sq_cols_left_ > cols_ ? sq_cols_left_ - cols_ : 0;
    ++sq_cols_blk_;
    sq_mb_ = 0;
  } else {
    sq_rows_left_ -= rows_;
    ++sq_mb_;
  }
}

// Simulates cycle now_: the combinational signals from the registers, then the registers' next
// values. Returns whether anything happened (a handshake, an event, a state change).
bool EngineSim::step() {
  const uint64_t t = now_;
  bool act = false;

  // ---- memory outputs (registered in the memory model)
  const bool rlast = !rd_.empty() && rd_.front().last_beat == t;
  const bool ar_ready = rd_.size() < read_limit_;  // also tsr_axi_rd's track FIFO not full
  const bool bvalid = !resp_.empty() && resp_.front() == t;
  const bool aw_ready = wr_out_ < write_limit_;    // also tsr_store's outstanding FIFO not full
  const bool w_open = st_busy_ && st_aw_done_ && st_beat_ != st_end_;  // an accepted burst wants data
  const bool w_ready = w_open && wr_credit(t) >= static_cast<int64_t>(beat_);

  // ---- tsr_axi_rd
  uint32_t burst = 0;
  bool ar_fire = false, last_burst = false;
  if (ax_busy_) {
    const uint64_t page_left = (kPageBytes - ax_.addr % kPageBytes) / beat_;
    burst = static_cast<uint32_t>(std::min<uint64_t>({ax_.beats, page_left, kMaxBurstBeats}));
    last_burst = burst == ax_.beats;
    ar_fire = ar_ready;
  }
  const bool req_ready = !ax_busy_ || (ar_fire && last_burst);

  // ---- tsr_loader's arbiter: a descriptor fetch first, then round robin
  const bool desc_valid = ctrl_ == Ctrl::kFetch;
  const bool lb_valid = lb_ == Lb::kMult || lb_ == Lb::kShift || lb_ == Lb::kBias || lb_ == Lb::kRows;
  const bool la_valid = la_ == La::kRows || la_ == La::kCin;
  const bool pick_a = la_valid && (rr_ || !lb_valid);
  const bool la_grant = !desc_valid && pick_a && req_ready;
  const bool lb_grant = !desc_valid && !pick_a && lb_valid && req_ready;
  const bool desc_grant = desc_valid && req_ready;

  // ---- tsr_seq
  const bool go = ctrl_ == Ctrl::kRun && can_start_tile(t);
  uint8_t a_rel = 0, b_rel = 0, c_rel = 0, p_rel = 0;
  bool ro_start = false, row_out = false, tile_end = false, done_now = false;
  if (!ev_arel_.empty() && ev_arel_.front().at == t) a_rel = uint8_t(1u << ev_arel_.front().slot);
  if (!ev_brel_.empty() && ev_brel_.front().at == t) b_rel = uint8_t(1u << ev_brel_.front().slot);
  if (!ev_ro_.empty() && ev_ro_.front() == t) ro_start = true;
  if (!ev_rows_.empty() && ev_rows_.front().first + ev_row_ == t) row_out = true;
  if (!ev_end_.empty() && ev_end_.front().at == t) {
    const TileEndEvent& e = ev_end_.front();
    tile_end = true;
    if (acc_) c_rel = uint8_t(1u << e.cslot);
    if (e.nblast) p_rel = uint8_t(1u << e.pslot);
    done_now = e.final_tile;
  }
  if (ctrl_ == Ctrl::kRun && tiles_left() && t >= sq_next_start_ && !go) ++stall_;

  // ---- tsr_store
  const bool take = !st_busy_ && !st_fifo_.empty();
  const bool aw_fire = st_busy_ && !st_aw_done_ && aw_ready;
  const bool w_fire = st_busy_ && st_beat_ != st_end_ && w_ready;
  const bool store_idle = st_fifo_.empty() && !st_busy_ && wr_out_ == 0;

  act = rlast || bvalid || ar_fire || desc_grant || la_grant || lb_grant || go || a_rel || b_rel || ro_start ||
        row_out || tile_end || take || aw_fire || w_fire;

  // ================================================================ next state
  // ---- memory write side and tsr_store
  if (w_fire) {
    wc_val_ = std::min<int64_t>(cap_, wr_credit(t) - static_cast<int64_t>(beat_) + bpc_);
    wc_edge_ = t + 1;
    if (st_beat_ + 1 == st_end_) {  // WLAST: the response comes `latency` after the edge that takes it
      last_bvalid_ = std::max(t + 1 + lat_, last_bvalid_ + 1);
      resp_.push(last_bvalid_);
    }
  }
  if (bvalid) resp_.pop();
  wr_out_ = wr_out_ + (aw_fire ? 1 : 0) - (bvalid ? 1 : 0);
  {
    const bool aw_done = st_aw_done_ || aw_fire;
    const uint32_t beat = st_beat_ + (w_fire ? 1 : 0);
    if (st_busy_ && aw_done && beat == st_end_) {
      if (st_end_ == st_beats_) {
        st_busy_ = false;
      } else {  // the rest of the row, from the next page
        st_aw_done_ = false;
        st_end_ = st_beats_;
      }
    } else {
      st_aw_done_ = aw_done;
    }
    st_beat_ = beat;
  }
  if (take) {
    const StoreRow& r = st_fifo_.front();
    st_busy_ = true;
    st_aw_done_ = false;
    st_beat_ = 0;
    st_end_ = r.first_end;
    st_beats_ = r.beats;
    st_fifo_.pop();
  }

  // ---- read side: the last beat of a burst (fills a slot), address handshakes, new requests
  uint8_t a_fill = 0, b_fill = 0, c_fill = 0;
  bool desc_in = false;
  if (rlast) {
    const ReadBurst& b = rd_.front();
    if (b.fill) {
      switch (b.dest) {
        case Dest::kA: a_fill = uint8_t(1u << b.slot); break;
        case Dest::kB: b_fill = uint8_t(1u << b.slot); break;
        case Dest::kCin: c_fill = uint8_t(1u << b.slot); break;
        case Dest::kDesc: desc_in = true; break;
        case Dest::kTable: break;
      }
    }
    rd_.pop();
  }
  if (ar_fire) {
    const uint64_t last = schedule_burst(t + 1 + lat_, burst);
    rd_.push({last, ax_.dest, ax_.slot, last_burst && ax_.fill});
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
        act = true;
      } else if (!((b_busy_ | p_busy_) >> (lb_nb_ & 1) & 1)) {
        b_claim = uint8_t(1u << (lb_nb_ & 1));
        lb_k_ = 0;
        lb_ = int8_ ? Lb::kMult : (bias_ ? Lb::kBias : Lb::kRows);
        act = true;
      }
      break;
    case Lb::kMult:
      if (lb_grant) lb_ = Lb::kShift;
      break;
    case Lb::kShift:
      if (lb_grant) lb_ = bias_ ? Lb::kBias : Lb::kRows;
      break;
    case Lb::kBias:
      if (lb_grant) lb_ = Lb::kRows;
      break;
    case Lb::kRows:
      if (lb_grant) {
        if (lb_k_ == k_ - 1) {
          lb_ = Lb::kWait;
          ++lb_nb_;
          lb_cols_left_ = lb_cols_left_ > cols_ ? lb_cols_left_ - cols_ : 0;
        }
        ++lb_k_;
      }
      break;
    default: break;
  }
  switch (la_) {
    case La::kWait:
      if (la_cols_left_ == 0) {
        la_ = La::kIdle;
        act = true;
      } else if (!((a_busy_ >> la_tile_) & 1) && !(acc_ && ((c_busy_ >> la_tile_) & 1))) {
        a_claim = uint8_t(1u << la_tile_);
        if (acc_) c_claim = a_claim;
        la_i_ = 0;
        la_ = La::kRows;
        act = true;
      }
      break;
    case La::kRows:
    case La::kCin:
      if (la_grant) {
        const bool row_last = la_i_ + 1 == std::min(rows_, la_rows_left_);
        ++la_i_;
        if (row_last && la_ == La::kRows && acc_) {
          la_ = La::kCin;
          la_i_ = 0;
        } else if (row_last) {
          la_ = La::kWait;
          la_tile_ ^= 1;
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
      break;
    default: break;
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
  if (row_out) {
    const RowsEvent& e = ev_rows_.front();
    const uint64_t addr = e.c_addr + ev_row_ * d_.ldc;
    const uint64_t bytes = uint64_t{e.cols} * (int8_ ? 1 : 4), lane = addr % beat_;
    const uint32_t beats = static_cast<uint32_t>(ceil_div(lane + bytes, beat_));
    const uint64_t page_beats = (kPageBytes - (addr - lane) % kPageBytes) / beat_;
    st_fifo_.push({beats, static_cast<uint32_t>(std::min<uint64_t>(page_beats, beats))});
    write_bytes_ += bytes;
    if (++ev_row_ == e.rows) {
      ev_rows_.pop();
      ev_row_ = 0;
    }
  }
  if (tile_end) ev_end_.pop();
  if (take) ++sq_credits_;
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
      act = true;
      break;
    case Ctrl::kCheck:
      if (gemm_) {
        start_gemm();
        ctrl_ = Ctrl::kRun;
      } else {
        ctrl_ = Ctrl::kComplete;
      }
      act = true;
      break;
    case Ctrl::kRun:
      if (sq_done_ && store_idle) {
        ctrl_ = Ctrl::kComplete;
        act = true;
      }
      break;
    case Ctrl::kComplete:
      ctrl_ = Ctrl::kDone;
      act = true;
      break;
    case Ctrl::kDone: break;
  }
  ++now_;
  return act;
}

// The first cycle after now_ at which a quiet engine may do something: the next scheduled event.
uint64_t EngineSim::wake() const {
  uint64_t w = kNever;
  if (!rd_.empty()) w = std::min(w, rd_.front().last_beat);
  if (!resp_.empty()) w = std::min(w, resp_.front());
  if (!ev_arel_.empty()) w = std::min(w, ev_arel_.front().at);
  if (!ev_brel_.empty()) w = std::min(w, ev_brel_.front().at);
  if (!ev_ro_.empty()) w = std::min(w, ev_ro_.front());
  if (!ev_rows_.empty()) w = std::min(w, ev_rows_.front().first + ev_row_);
  if (!ev_end_.empty()) w = std::min(w, ev_end_.front().at);
  if (ctrl_ == Ctrl::kRun && tiles_left() && sq_next_start_ >= now_) w = std::min(w, sq_next_start_);
  if (st_busy_ && st_aw_done_ && st_beat_ != st_end_) {  // W data waiting for bandwidth credit
    const int64_t c = wr_credit(now_);
    const uint64_t wait = c >= static_cast<int64_t>(beat_) ? 0 : ceil_div(beat_ - c, bpc_);
    w = std::min(w, now_ + wait);
  }
  return std::max(w, now_);
}

TimingEstimate EngineSim::run() {
  wc_val_ = cap_;
  while (ctrl_ != Ctrl::kDone) {
    const bool active = step();
    if (active || !skip_) continue;
    const uint64_t w = wake();
    if (w == kNever) throw std::logic_error(fmt::format("timing model: engine stuck at cycle {}", now_));
    // The cycles up to w are copies of the quiet one just simulated, stalls included.
    if (ctrl_ == Ctrl::kRun && tiles_left() && now_ - 1 >= sq_next_start_) stall_ += w - now_;
    now_ = w;
  }
  TimingEstimate e;
  e.cycles = now_;
  e.stall_cycles = stall_;
  e.read_bytes = read_beats_ * beat_;
  e.write_bytes = write_bytes_;
  return e;
}

}  // namespace

uint64_t output_stationary_cycles(uint32_t m, uint32_t n, uint32_t k, const EngineConfig& cfg) {
  return ceil_div(m, cfg.rows) * ceil_div(n, cfg.cols) * (uint64_t{k} + cfg.rows + cfg.cols - 2);
}

TimingEstimate estimate(const Descriptor& d, const EngineConfig& cfg, const MemoryModelConfig& mem) {
  return EngineSim(d, cfg, mem, true).run();
}

namespace detail {
TimingEstimate estimate_every_cycle(const Descriptor& d, const EngineConfig& cfg, const MemoryModelConfig& mem) {
  return EngineSim(d, cfg, mem, false).run();
}
}  // namespace detail

}  // namespace tessera
