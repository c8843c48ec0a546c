// Invariants of tsr_fifo, bound into every instance (simulation only, see tsr_bind.sv): the FIFO
// drops a push when full and ignores a pop when empty, so a caller that does either has lost or
// invented data. Every caller must hold off on full_o / empty_o, or be sized so it never needs to.
module tsr_fifo_sva (
  input logic clk_i,
  input logic rst_ni,
  input logic push_i,
  input logic pop_i,
  input logic full_o,
  input logic empty_o
);
  // Sampled at the clock edge outside reset (rst_ni is asynchronous, as in the design).
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (rst_ni) begin
      a_fifo_no_push_when_full: assert (!(push_i && full_o))
        else begin
          $error("push into a full FIFO: the entry is lost");
          tsr_sva_pkg::tsr_assertion_failed($sformatf("%m"));
        end
      a_fifo_no_pop_when_empty: assert (!(pop_i && empty_o))
        else begin
          $error("pop from an empty FIFO");
          tsr_sva_pkg::tsr_assertion_failed($sformatf("%m"));
        end
    end
  end
endmodule
