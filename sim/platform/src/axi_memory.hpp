// AXI4 slave memory model: a latency, a bandwidth per direction and a bound on bursts in flight,
// all configurable. Read data returns in order; write responses follow the last data beat after
// the same latency; write data comes after its address, or (w_first) up to kEarlyBeats beats
// before it, as AXI allows. Out-of-range bursts get DECERR; a configured address gets SLVERR. It also
// checks the master against the AXI rules the engine promises (INCR, aligned, no 4 KB crossing).
// Faults for the health checks: bit flips on read data, and a hang (reads never answered).
#pragma once

#include <deque>
#include <functional>
#include <systemc>

#include <fmt/format.h>

#include "scoreboard.hpp"
#include "tessera/model/faults.hpp"
#include "tessera/model/memory.hpp"
#include "tessera/platform/platform.hpp"

namespace tessera {

struct AxiMemoryConfig {
  MemoryModelConfig timing;
  double flip_rate = 0;  // probability that a bit of read data arrives flipped
  bool hang = false;     // accept reads but never answer them
  uint64_t seed = 1;
};

template <int Width, typename Strb>
class AxiMemory : public sc_core::sc_module {
 public:
  static constexpr uint32_t kBeatBytes = Width / 8;
  using Data = sc_dt::sc_bv<Width>;

  sc_core::sc_in<bool> clk;
  sc_core::sc_in<bool> arvalid;
  sc_core::sc_out<bool> arready;
  sc_core::sc_in<uint32_t> araddr, arlen, arsize, arburst;
  sc_core::sc_out<bool> rvalid;
  sc_core::sc_in<bool> rready;
  sc_core::sc_out<Data> rdata;
  sc_core::sc_out<uint32_t> rresp;
  sc_core::sc_out<bool> rlast;
  sc_core::sc_in<bool> awvalid;
  sc_core::sc_out<bool> awready;
  sc_core::sc_in<uint32_t> awaddr, awlen, awsize, awburst;
  sc_core::sc_in<bool> wvalid;
  sc_core::sc_out<bool> wready;
  sc_core::sc_in<Data> wdata;
  sc_core::sc_in<Strb> wstrb;
  sc_core::sc_in<bool> wlast;
  sc_core::sc_out<bool> bvalid;
  sc_core::sc_in<bool> bready;
  sc_core::sc_out<uint32_t> bresp;

  AxiMemory(sc_core::sc_module_name name, Memory& mem, const AxiMemoryConfig& cfg, Scoreboard* sb)
      : sc_module(name), mem_(mem), cfg_(cfg.timing), hang_(cfg.hang), flipper_(cfg.flip_rate, cfg.seed), sb_(sb) {
    bpc_ = cfg_.bytes_per_cycle ? cfg_.bytes_per_cycle : kBeatBytes;
    SC_METHOD(tick);
    sensitive << clk.pos();
    dont_initialize();
  }

  uint64_t cycle() const { return cycle_; }

 private:
  SC_HAS_PROCESS(AxiMemory);

  struct Burst {
    uint64_t addr;
    uint32_t beats, done = 0;
    uint64_t ready_at;
    uint32_t resp = 0;
  };
  struct Beat {
    Data data;
    uint64_t strb;
    bool last;
  };
  static constexpr size_t kEarlyBeats = 16;  // write data held for bursts whose address is to come

  template <typename Port, typename T>
  static void drive(Port& p, const T& v) {
    if (!(p.read() == v)) p.write(v);
  }

  uint32_t check_burst(uint64_t addr, uint32_t len, uint32_t size, uint32_t burst, const char* ch) {
    if (burst != 1) sb_note(fmt::format("{}: burst type {} is not INCR", ch, burst));
    if ((1u << size) != kBeatBytes) sb_note(fmt::format("{}: size {} is not the bus width", ch, size));
    if (addr % kBeatBytes) sb_note(fmt::format("{}: address {:#x} is not beat-aligned", ch, addr));
    const uint64_t end = addr + uint64_t{len + 1} * kBeatBytes;
    if ((addr >> 12) != ((end - 1) >> 12))
      sb_note(fmt::format("{}: burst [{:#x}, {:#x}) crosses a 4 KB boundary", ch, addr, end));
    if (!mem_.contains(addr, end - addr)) return 3;  // DECERR
    if (cfg_.slverr_addr && *cfg_.slverr_addr >= addr && *cfg_.slverr_addr < end) {
      if (sb_) sb_->injected_error();
      return 2;  // SLVERR
    }
    return 0;
  }

  void sb_note(const std::string& s) {
    if (sb_) sb_->protocol_error(s);
  }

  void tick() {
    ++cycle_;
    // Handshakes completed at this edge (both sides' values from the cycle before).
    if (arvalid.read() && ar_ready_) {
      Burst b{araddr.read(), arlen.read() + 1, 0, cycle_ + cfg_.latency};
      b.resp = check_burst(b.addr, arlen.read(), arsize.read(), arburst.read(), "AR");
      reads_.push_back(b);
    }
    if (r_valid_ && rready.read()) {
      rd_credit_ -= kBeatBytes;
      Burst& b = reads_.front();
      if (++b.done == b.beats) reads_.pop_front();
    }
    if (awvalid.read() && aw_ready_) {
      Burst b{awaddr.read(), awlen.read() + 1, 0, 0};
      b.resp = check_burst(b.addr, awlen.read(), awsize.read(), awburst.read(), "AW");
      writes_.push_back(b);
    }
    if (wvalid.read() && w_ready_) {
      wr_credit_ -= kBeatBytes;
      beats_.push_back({wdata.read(), static_cast<uint64_t>(wstrb.read()), wlast.read()});
    }
    for (; !beats_.empty() && !writes_.empty(); beats_.pop_front()) write_beat(beats_.front());
    if (b_valid_ && bready.read()) responses_.pop_front();

    // Outputs for the next cycle.
    // Bandwidth: each direction earns bytes_per_cycle of credit a cycle; a beat spends a beat's worth.
    rd_credit_ = std::min<uint64_t>(rd_credit_ + bpc_, 2 * kBeatBytes);
    wr_credit_ = std::min<uint64_t>(wr_credit_ + bpc_, 2 * kBeatBytes);
    ar_ready_ = reads_.size() < cfg_.max_reads;
    aw_ready_ = writes_.size() + responses_.size() < cfg_.max_writes;
    r_valid_ = !hang_ && !reads_.empty() && reads_.front().ready_at <= cycle_ && rd_credit_ >= kBeatBytes;
    if (r_valid_) {
      const Burst& b = reads_.front();
      const uint64_t a = b.addr + uint64_t{b.done} * kBeatBytes;
      uint8_t bytes[kBeatBytes] = {};
      if (b.resp != 3) std::memcpy(bytes, mem_.data() + a, kBeatBytes);
      flipper_.apply(bytes, kBeatBytes);  // the scoreboard sees the wrong results that follow
      for (uint32_t w = 0; w < kBeatBytes / 4; ++w) {
        uint32_t v;
        std::memcpy(&v, bytes + 4 * w, 4);
        beat_.set_word(w, v);
      }
      rdata.write(beat_);
      drive(rresp, b.resp);
      drive(rlast, b.done + 1 == b.beats);
    }
    // Data for an accepted address (or, w_first, ahead of it), at the write bandwidth.
    w_ready_ = (cfg_.w_first ? beats_.size() < kEarlyBeats : !writes_.empty()) && wr_credit_ >= kBeatBytes;
    b_valid_ = !responses_.empty() && responses_.front().ready_at <= cycle_;
    if (b_valid_) drive(bresp, responses_.front().resp);
    drive(arready, ar_ready_);
    drive(rvalid, r_valid_);
    drive(awready, aw_ready_);
    drive(wready, w_ready_);
    drive(bvalid, b_valid_);
  }

  void write_beat(const Beat& beat) {
    Burst& b = writes_.front();
    const uint64_t a = b.addr + uint64_t{b.done} * kBeatBytes;
    uint8_t bytes[kBeatBytes];
    for (uint32_t w = 0; w < kBeatBytes / 4; ++w) {
      const uint32_t v = beat.data.get_word(w);
      std::memcpy(bytes + 4 * w, &v, 4);
    }
    if (b.resp == 0)
      for (uint32_t i = 0; i < kBeatBytes; ++i)
        if ((beat.strb >> i) & 1) mem_.data()[a + i] = bytes[i];
    if (sb_ && b.resp == 0) sb_->axi_write(a, std::span<const uint8_t>(bytes, kBeatBytes), beat.strb);
    const bool last = ++b.done == b.beats;
    if (beat.last != last)
      sb_note(fmt::format("W: WLAST {} on beat {} of a {}-beat burst at {:#x}", beat.last, b.done, b.beats, b.addr));
    if (last) {
      b.ready_at = cycle_ + cfg_.latency;
      responses_.push_back(b);
      writes_.pop_front();
    }
  }

  Memory& mem_;
  MemoryModelConfig cfg_;
  bool hang_;
  BitFlipper flipper_;
  Scoreboard* sb_;
  uint32_t bpc_;
  uint64_t cycle_ = 0, rd_credit_ = 0, wr_credit_ = 0;
  bool ar_ready_ = false, r_valid_ = false, aw_ready_ = false, w_ready_ = false, b_valid_ = false;
  std::deque<Burst> reads_, writes_, responses_;
  std::deque<Beat> beats_;  // write data taken, waiting for its burst's address
  Data beat_;
};

}  // namespace tessera
