#include "tessera/platform/platform.hpp"

#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <systemc.h>  // Verilator's SystemC headers expect its global names
#include <tlm>
#include <tlm_utils/simple_initiator_socket.h>
#include <verilated.h>
#include <verilated_fst_sc.h>
#ifdef TESSERA_RTL_COVERAGE
#include <unistd.h>

#include <cstdlib>

#include <verilated_cov.h>
#endif

#include "axi_memory.hpp"
#include "csr_bridge.hpp"
#include "scoreboard.hpp"
#include "tessera_presets.inc"  // generated: the Verilated model of each preset

namespace tessera {
namespace {

using namespace sc_core;

constexpr double kClockNs = 4.0;  // nominal 250 MHz; only cycle counts matter

std::string g_failed_assertion;  // the first RTL assertion that failed in this process

}  // namespace
}  // namespace tessera

// Called by the RTL's checkers (rtl/sva/tsr_sva_pkg.sv) through DPI, with the assertion's name.
extern "C" void tsr_assertion_failed(const char* name) {
  if (tessera::g_failed_assertion.empty()) tessera::g_failed_assertion = name;
}

namespace tessera {
namespace {

bool g_elaborated = false;

// Issues the host's CSR accesses as TLM-2.0 transactions from a SystemC thread (b_transport
// waits on the clock) and pauses the kernel when each one completes.
class HostAgent : public sc_module {
 public:
  tlm_utils::simple_initiator_socket<HostAgent> socket;

  explicit HostAgent(sc_module_name name) : sc_module(name), socket("socket") { SC_THREAD(serve); }

  // Called between sc_start() runs.
  uint32_t access(bool write, uint32_t addr, uint32_t value) {
    write_ = write;
    addr_ = addr;
    value_ = value;
    done_ = false;
    request_.notify(SC_ZERO_TIME);
    sc_start();
    if (!done_) throw std::runtime_error("simulation stopped during a CSR access");
    if (!ok_)
      throw std::runtime_error(fmt::format("CSR {} at {:#05x} got no response from the engine within {} cycles",
                                           write ? "write" : "read", addr, CsrBridge::kTimeoutCycles));
    return value_;
  }

 private:
  SC_HAS_PROCESS(HostAgent);

  void serve() {
    for (;;) {
      wait(request_);
      tlm::tlm_generic_payload trans;
      sc_time delay = SC_ZERO_TIME;
      uint32_t data = value_;
      trans.set_command(write_ ? tlm::TLM_WRITE_COMMAND : tlm::TLM_READ_COMMAND);
      trans.set_address(addr_);
      trans.set_data_ptr(reinterpret_cast<unsigned char*>(&data));
      trans.set_data_length(4);
      trans.set_streaming_width(4);
      trans.set_byte_enable_ptr(nullptr);
      trans.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
      socket->b_transport(trans, delay);
      ok_ = trans.is_response_ok();
      value_ = data;
      done_ = true;
      sc_pause();
    }
  }

  sc_event request_;
  bool write_ = false, ok_ = false, done_ = false;
  uint32_t addr_ = 0, value_ = 0;
};

// Pauses the kernel on a rising interrupt while the host waits for one.
class IrqWatch : public sc_module {
 public:
  sc_in<bool> irq;
  bool armed = false;
  explicit IrqWatch(sc_module_name name) : sc_module(name) {
    SC_METHOD(on_irq);
    sensitive << irq.pos();
    dont_initialize();
  }

 private:
  SC_HAS_PROCESS(IrqWatch);
  void on_irq() {
    if (armed) sc_pause();
  }
};

template <class Model, int Width>
class PlatformImpl final : public Platform {
  using Strb = std::conditional_t<(Width / 8 <= 32), uint32_t, uint64_t>;
  using Data = sc_dt::sc_bv<Width>;

 public:
  PlatformImpl(const PlatformConfig& cfg, const EngineConfig& engine)
      : engine_(engine),
        mem_(cfg.mem_bytes),
        sb_(cfg.scoreboard ? std::make_unique<Scoreboard>(engine, cfg.mem_bytes) : nullptr),
        clk_("clk", sc_time(kClockNs, SC_NS)),
        power_on_(cfg.init_seed),
        dut_("dut"),
        bridge_("csr_bridge", sb_.get()),
        memory_("memory", mem_, with_fault(cfg), sb_.get()),
        agent_("host"),
        irq_watch_("irq_watch") {
    if (!cfg.trace_path.empty()) Verilated::traceEverOn(true);
    // A failing RTL assertion (rtl/sva) prints its name and stops the model; check_rtl() turns that
    // into an error for the caller instead of aborting the process.
    Verilated::threadContextp()->fatalOnError(false);
    bind();
    const bool stuck = cfg.fault.kind == FaultConfig::Kind::kStuck;
    fault_pe_.write(stuck ? cfg.fault.row * engine.cols + cfg.fault.col : 0xffff);
    fault_set_.write(stuck && cfg.fault.value ? 1u << cfg.fault.bit : 0);
    fault_clr_.write(stuck && !cfg.fault.value ? 1u << cfg.fault.bit : 0);
    rst_n_.write(false);
    sc_start(SC_ZERO_TIME);
    if (!cfg.trace_path.empty()) {
      trace_ = std::make_unique<VerilatedFstSc>();
      dut_.trace(trace_.get(), 99);
      trace_->open(cfg.trace_path.c_str());
    }
    run(4);
    rst_n_.write(true);
    run(2);
    if (cfg.counter_start)
      for (uint32_t i = 0; i < spec::kNumCounters; ++i) dut_.rootp->tsr_top__DOT__u_ctrl__DOT__cnt_q[i] = cfg.counter_start;
  }

  ~PlatformImpl() override {
    if (trace_) trace_->close();
#ifdef TESSERA_RTL_COVERAGE
    // One file per simulator process; scripts/regress merges them with verilator_coverage.
    if (const char* dir = std::getenv("TESSERA_COVERAGE_DIR"))
      Verilated::threadContextp()->coveragep()->write(fmt::format("{}/sim_{}.dat", dir, ::getpid()).c_str());
#endif
  }

  const EngineConfig& engine() const override { return engine_; }
  uint32_t csr_read(uint32_t offset) override {
    const uint32_t v = agent_.access(false, offset, 0);
    check_rtl();
    return v;
  }
  void csr_write(uint32_t offset, uint32_t value) override {
    agent_.access(true, offset, value);
    check_rtl();
  }

  void mem_write(uint64_t addr, std::span<const uint8_t> bytes) override {
    mem_.write(addr, bytes);
    if (sb_) sb_->host_write(addr, bytes);
  }
  void mem_read(uint64_t addr, std::span<uint8_t> bytes) override { mem_.read(addr, bytes); }
  uint64_t mem_size() const override { return mem_.size(); }

  bool run_until_irq(uint64_t max_cycles) override {
    if (irq()) return true;
    irq_watch_.armed = true;
    sc_start(sc_time(kClockNs * static_cast<double>(max_cycles), SC_NS));
    irq_watch_.armed = false;
    check_rtl();
    return irq();
  }
  void run(uint64_t cycles) override {
    sc_start(sc_time(kClockNs * static_cast<double>(cycles), SC_NS));
    check_rtl();
  }
  uint64_t cycles() const override { return memory_.cycle(); }
  bool irq() const override { return irq_.read(); }

  ScoreboardReport scoreboard() const override { return sb_ ? sb_->report() : ScoreboardReport{}; }

 private:
  void check_rtl() const {
    if (Verilated::threadContextp()->gotError())
      throw std::runtime_error(fmt::format("RTL assertion {} failed by cycle {}",
                                           g_failed_assertion.empty() ? "(unnamed)" : g_failed_assertion,
                                           memory_.cycle()));
  }

  static AxiMemoryConfig with_fault(const PlatformConfig& cfg) {
    AxiMemoryConfig m{cfg.mem};
    if (cfg.fault.kind == FaultConfig::Kind::kSlverr) m.timing.slverr_addr = cfg.fault.addr;
    if (cfg.fault.kind == FaultConfig::Kind::kFlip) m.flip_rate = cfg.fault.rate;
    m.hang = cfg.fault.kind == FaultConfig::Kind::kHang;
    m.seed = cfg.seed;
    return m;
  }

  void bind() {
    dut_.clk_i(clk_);
    dut_.fault_pe_i(fault_pe_);
    dut_.fault_set_i(fault_set_);
    dut_.fault_clr_i(fault_clr_);
    dut_.rst_ni(rst_n_);
    bridge_.clk(clk_);
    memory_.clk(clk_);
    agent_.socket.bind(bridge_.socket);
    irq_watch_.irq(irq_);
    dut_.irq_o(irq_);
    // CSR port
    dut_.s_axil_awvalid_i(awvalid_); bridge_.awvalid(awvalid_);
    dut_.s_axil_awready_o(awready_); bridge_.awready(awready_);
    dut_.s_axil_awaddr_i(awaddr_);   bridge_.awaddr(awaddr_);
    dut_.s_axil_wvalid_i(wvalid_);   bridge_.wvalid(wvalid_);
    dut_.s_axil_wready_o(wready_);   bridge_.wready(wready_);
    dut_.s_axil_wdata_i(wdata_);     bridge_.wdata(wdata_);
    dut_.s_axil_wstrb_i(wstrb_);     bridge_.wstrb(wstrb_);
    dut_.s_axil_bvalid_o(bvalid_);   bridge_.bvalid(bvalid_);
    dut_.s_axil_bready_i(bready_);   bridge_.bready(bready_);
    dut_.s_axil_bresp_o(bresp_);     bridge_.bresp(bresp_);
    dut_.s_axil_arvalid_i(arvalid_); bridge_.arvalid(arvalid_);
    dut_.s_axil_arready_o(arready_); bridge_.arready(arready_);
    dut_.s_axil_araddr_i(araddr_);   bridge_.araddr(araddr_);
    dut_.s_axil_rvalid_o(rvalid_);   bridge_.rvalid(rvalid_);
    dut_.s_axil_rready_i(rready_);   bridge_.rready(rready_);
    dut_.s_axil_rdata_o(rdata_);     bridge_.rdata(rdata_);
    dut_.s_axil_rresp_o(rresp_);     bridge_.rresp(rresp_);
    // memory port
    dut_.m_axi_arvalid_o(m_arvalid_); memory_.arvalid(m_arvalid_);
    dut_.m_axi_arready_i(m_arready_); memory_.arready(m_arready_);
    dut_.m_axi_araddr_o(m_araddr_);   memory_.araddr(m_araddr_);
    dut_.m_axi_arlen_o(m_arlen_);     memory_.arlen(m_arlen_);
    dut_.m_axi_arsize_o(m_arsize_);   memory_.arsize(m_arsize_);
    dut_.m_axi_arburst_o(m_arburst_); memory_.arburst(m_arburst_);
    dut_.m_axi_rvalid_i(m_rvalid_);   memory_.rvalid(m_rvalid_);
    dut_.m_axi_rready_o(m_rready_);   memory_.rready(m_rready_);
    dut_.m_axi_rdata_i(m_rdata_);     memory_.rdata(m_rdata_);
    dut_.m_axi_rresp_i(m_rresp_);     memory_.rresp(m_rresp_);
    dut_.m_axi_rlast_i(m_rlast_);     memory_.rlast(m_rlast_);
    dut_.m_axi_awvalid_o(m_awvalid_); memory_.awvalid(m_awvalid_);
    dut_.m_axi_awready_i(m_awready_); memory_.awready(m_awready_);
    dut_.m_axi_awaddr_o(m_awaddr_);   memory_.awaddr(m_awaddr_);
    dut_.m_axi_awlen_o(m_awlen_);     memory_.awlen(m_awlen_);
    dut_.m_axi_awsize_o(m_awsize_);   memory_.awsize(m_awsize_);
    dut_.m_axi_awburst_o(m_awburst_); memory_.awburst(m_awburst_);
    dut_.m_axi_wvalid_o(m_wvalid_);   memory_.wvalid(m_wvalid_);
    dut_.m_axi_wready_i(m_wready_);   memory_.wready(m_wready_);
    dut_.m_axi_wdata_o(m_wdata_);     memory_.wdata(m_wdata_);
    dut_.m_axi_wstrb_o(m_wstrb_);     memory_.wstrb(m_wstrb_);
    dut_.m_axi_wlast_o(m_wlast_);     memory_.wlast(m_wlast_);
    dut_.m_axi_bvalid_i(m_bvalid_);   memory_.bvalid(m_bvalid_);
    dut_.m_axi_bready_o(m_bready_);   memory_.bready(m_bready_);
    dut_.m_axi_bresp_i(m_bresp_);     memory_.bresp(m_bresp_);
  }

  EngineConfig engine_;
  Memory mem_;
  std::unique_ptr<Scoreboard> sb_;
  sc_clock clk_;
  sc_signal<bool> rst_n_{"rst_n"}, irq_{"irq"};
  sc_signal<uint32_t> fault_pe_{"fault_pe"}, fault_set_{"fault_set"}, fault_clr_{"fault_clr"};
  sc_signal<bool> awvalid_, awready_, wvalid_, wready_, bvalid_, bready_, arvalid_, arready_, rvalid_, rready_;
  sc_signal<uint32_t> awaddr_, wdata_, wstrb_, bresp_, araddr_, rdata_, rresp_;
  sc_signal<bool> m_arvalid_, m_arready_, m_rvalid_, m_rready_, m_rlast_, m_awvalid_, m_awready_;
  sc_signal<bool> m_wvalid_, m_wready_, m_wlast_, m_bvalid_, m_bready_;
  sc_signal<uint32_t> m_araddr_, m_arlen_, m_arsize_, m_arburst_, m_rresp_;
  sc_signal<uint32_t> m_awaddr_, m_awlen_, m_awsize_, m_awburst_, m_bresp_;
  sc_signal<Data> m_rdata_, m_wdata_;
  sc_signal<Strb> m_wstrb_;
  // Sets the model's power-on values as dut_ is built, which draws them (so declared before it).
  struct PowerOnValues {
    explicit PowerOnValues(uint32_t seed) {
      Verilated::threadContextp()->randReset(seed ? 2 : 0);  // 2: random, 0: zeros
      if (seed) Verilated::threadContextp()->randSeed(static_cast<int>(seed));
    }
  } power_on_;
  Model dut_;
  CsrBridge bridge_;
  AxiMemory<Width, Strb> memory_;
  HostAgent agent_;
  IrqWatch irq_watch_;
  std::unique_ptr<VerilatedFstSc> trace_;
};

}  // namespace

std::unique_ptr<Platform> Platform::create(const PlatformConfig& cfg) {
  const EngineConfig engine = EngineConfig::from_preset(EngineConfig::preset(cfg.preset));
  if (g_elaborated)
    throw std::logic_error("a SystemC platform was already elaborated in this process (SystemC allows one)");
  g_elaborated = true;
#define TESSERA_PRESET(model, name, bits) \
  if (cfg.preset == name) return std::make_unique<PlatformImpl<model, bits>>(cfg, engine);
  TESSERA_PRESETS
#undef TESSERA_PRESET
  throw std::invalid_argument(fmt::format(
      "preset '{}' has no Verilated model in this build (it has {}); a build for the full test tier has every "
      "preset (-DTESSERA_TEST_TIER=full, as scripts/test --full configures it)",
      cfg.preset, fmt::join(presets(), ", ")));
}

std::vector<std::string> Platform::presets() {
  std::vector<std::string> names;
#define TESSERA_PRESET(model, name, bits) names.push_back(name);
  TESSERA_PRESETS
#undef TESSERA_PRESET
  return names;
}

}  // namespace tessera
