// TLM-2.0 target that turns each blocking transport call into an AXI4-Lite transaction on the
// engine's CSR port, one 32-bit register at a time, with a timeout so a dead slave is an error
// response rather than a hang.
#pragma once

#include <systemc>
#include <tlm>
#include <tlm_utils/simple_target_socket.h>

namespace tessera {

class Scoreboard;

class CsrBridge : public sc_core::sc_module {
 public:
  static constexpr unsigned kTimeoutCycles = 1000;

  tlm_utils::simple_target_socket<CsrBridge> socket;
  sc_core::sc_in<bool> clk;
  sc_core::sc_out<bool> awvalid, wvalid, bready, arvalid, rready;
  sc_core::sc_out<uint32_t> awaddr, wdata, wstrb, araddr;
  sc_core::sc_in<bool> awready, wready, bvalid, arready, rvalid;
  sc_core::sc_in<uint32_t> bresp, rdata, rresp;

  CsrBridge(sc_core::sc_module_name name, Scoreboard* sb);

 private:
  void b_transport(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay);
  bool wait_for(const sc_core::sc_in<bool>& sig);

  Scoreboard* sb_;
};

}  // namespace tessera
