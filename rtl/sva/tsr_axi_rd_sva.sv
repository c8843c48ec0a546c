// Rules of tsr_axi_rd (simulation only, see tsr_bind.sv): once aborted, the read master starts no
// new burst; AR stays valid only for a burst it offered before and the memory has not yet taken,
// which AXI forbids withdrawing. A burst started during the abort would be read for nothing and
// hold the drain up. And the registered length of the burst being offered is the one its address
// and the beats left give: to the page's end or the burst limit, whichever comes first.
module tsr_axi_rd_sva #(
  parameter int unsigned DataWidth = 256,
  localparam int unsigned BeatsWidth = tsr_pkg::BEATS_BITS
) (
  input logic                  clk_i,
  input logic                  rst_ni,
  input logic                  abort_i,
  input logic                  m_arvalid_o,
  input logic                  m_arready_i,
  input logic                  busy,
  input logic [$clog2(tsr_pkg::PAGE_BYTES)-1:0] addr,  // the offset within the page
  input logic [BeatsWidth-1:0] left,
  input logic [BeatsWidth-1:0] burst,
  input logic                  last
);
  localparam int unsigned BeatBytes = DataWidth / 8;
  logic [31:0] page_left, expect_burst;
  assign page_left    = (tsr_pkg::PAGE_BYTES - 32'(addr)) / BeatBytes;
  assign expect_burst = 32'(left) < page_left ? 32'(left) : page_left;
  logic offered_q;  // AR was valid and not taken in the previous cycle
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      offered_q <= 1'b0;
    end else begin
      offered_q <= m_arvalid_o && !m_arready_i;
      a_axi_rd_burst_length: assert (!busy || (32'(burst) == (expect_burst < tsr_pkg::MAX_BURST_BEATS ?
                                                                 expect_burst : tsr_pkg::MAX_BURST_BEATS) &&
                                               last == (burst == left)))
        else begin
          $error("the registered burst length %0d (last %0d) is not the one %0d beats left at 0x%03x give",
                 burst, last, left, addr);
          tsr_sva_pkg::tsr_assertion_failed($sformatf("%m"));
        end
      a_axi_rd_no_burst_after_abort: assert (!(abort_i && m_arvalid_o) || offered_q)
        else begin
          $error("a read burst was started during an abort");
          tsr_sva_pkg::tsr_assertion_failed($sformatf("%m"));
        end
    end
  end
endmodule
