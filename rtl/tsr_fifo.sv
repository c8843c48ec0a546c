// Synchronous FIFO: full/empty from registered pointers, storage without reset (infers RAM for
// deep/wide uses), first-word-fall-through output.
module tsr_fifo #(
  parameter int unsigned Width = 8,
  parameter int unsigned Depth = 4   // a power of two, at least 2
) (
  input  logic             clk_i,
  input  logic             rst_ni,
  input  logic             clear_i,
  input  logic             push_i,
  input  logic [Width-1:0] data_i,
  output logic             full_o,
  input  logic             pop_i,
  output logic [Width-1:0] data_o,
  output logic             empty_o,
  output logic [$clog2(Depth):0] count_o
);
  localparam int unsigned PtrW = $clog2(Depth);

  logic [Width-1:0] mem_q [Depth];
  logic [PtrW:0] wptr_d, wptr_q, rptr_d, rptr_q;
  logic do_push, do_pop;

  assign count_o = wptr_q - rptr_q;
  // full: the pointers differ in the wrap bit only (an equality, where count_o needs a subtract)
  assign full_o  = wptr_q == {~rptr_q[PtrW], rptr_q[PtrW-1:0]};
  assign empty_o = wptr_q == rptr_q;
  assign data_o  = mem_q[rptr_q[PtrW-1:0]];

  assign do_push = push_i && !full_o;
  assign do_pop  = pop_i && !empty_o;

  always_comb begin
    wptr_d = clear_i ? '0 : wptr_q + {{PtrW{1'b0}}, do_push};
    rptr_d = clear_i ? '0 : rptr_q + {{PtrW{1'b0}}, do_pop};
  end

  always_ff @(posedge clk_i) begin
    if (do_push) mem_q[wptr_q[PtrW-1:0]] <= data_i;
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      wptr_q <= '0;
      rptr_q <= '0;
    end else begin
      wptr_q <= wptr_d;
      rptr_q <= rptr_d;
    end
  end
endmodule
