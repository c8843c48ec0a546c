#include "csr_bridge.hpp"

#include <cstring>

#include "scoreboard.hpp"

namespace tessera {

CsrBridge::CsrBridge(sc_core::sc_module_name name, Scoreboard* sb) : sc_module(name), socket("socket"), sb_(sb) {
  socket.register_b_transport(this, &CsrBridge::b_transport);
}

// Waits for clock edges until `sig` was high at one; false after the timeout.
bool CsrBridge::wait_for(const sc_core::sc_in<bool>& sig) {
  for (unsigned i = 0; i < kTimeoutCycles; ++i) {
    wait(clk.posedge_event());
    if (sig.read()) return true;
  }
  return false;
}

void CsrBridge::b_transport(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay) {
  delay = sc_core::SC_ZERO_TIME;
  if (trans.get_data_length() != 4 || (trans.get_address() & 3) || trans.get_address() > 0xfff) {
    trans.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
    return;
  }
  const auto addr = static_cast<uint32_t>(trans.get_address());
  // Between transactions nothing is asked of the slave, so it has no response to give.
  if (sb_ && (bvalid.read() || rvalid.read()))
    sb_->protocol_error(bvalid.read() ? "CSR port: BVALID with no write outstanding"
                                      : "CSR port: RVALID with no read outstanding");
  uint32_t value = 0;
  bool ok = false;
  if (trans.is_write()) {
    std::memcpy(&value, trans.get_data_ptr(), 4);
    if (sb_) sb_->csr_write(addr, value);
    awaddr.write(addr);
    wdata.write(value);
    wstrb.write(0xf);
    awvalid.write(true);
    wvalid.write(true);
    bready.write(true);
    // The slave takes address and data together.
    ok = wait_for(awready);
    awvalid.write(false);
    wvalid.write(false);
    ok = ok && (bvalid.read() || wait_for(bvalid)) && bresp.read() == 0;
    bready.write(false);
  } else {
    araddr.write(addr);
    arvalid.write(true);
    rready.write(true);
    ok = wait_for(arready);
    arvalid.write(false);
    ok = ok && (rvalid.read() || wait_for(rvalid)) && rresp.read() == 0;
    value = rdata.read();
    rready.write(false);
    std::memcpy(trans.get_data_ptr(), &value, 4);
  }
  trans.set_response_status(ok ? tlm::TLM_OK_RESPONSE : tlm::TLM_GENERIC_ERROR_RESPONSE);
}

}  // namespace tessera
