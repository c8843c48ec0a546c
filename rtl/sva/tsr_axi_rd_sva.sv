// Rule of tsr_axi_rd (simulation only, see tsr_bind.sv): once aborted, the read master starts no
// new burst; AR stays valid only for a burst it offered before and the memory has not yet taken,
// which AXI forbids withdrawing. A burst started during the abort would be read for nothing and
// hold the drain up.
module tsr_axi_rd_sva (
  input logic clk_i,
  input logic rst_ni,
  input logic abort_i,
  input logic m_arvalid_o,
  input logic m_arready_i
);
  logic offered_q;  // AR was valid and not taken in the previous cycle
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      offered_q <= 1'b0;
    end else begin
      offered_q <= m_arvalid_o && !m_arready_i;
      a_axi_rd_no_burst_after_abort: assert (!(abort_i && m_arvalid_o) || offered_q)
        else begin
          $error("a read burst was started during an abort");
          tsr_sva_pkg::tsr_assertion_failed($sformatf("%m"));
        end
    end
  end
endmodule
