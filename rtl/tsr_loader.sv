// Read-request side of the engine: two loaders walk the tile schedule ahead of the array
// (tsr_loader_b: per column block, the tables and the B panel; tsr_loader_a: per tile, the A rows
// and C_in rows), and tsr_rd_arb shares the read master between them and descriptor fetches.
// This module keeps the slots: a slot is claimed before its data is requested, marked full when
// its last beat arrives and released by its consumer, so the loaders fill one slot while the array
// reads another. B, C_in and the tables ping-pong between two; A has four where a tile's A rows fit
// (tsr_int_pkg::a_quad), and uses two of them otherwise.
module tsr_loader #(
  parameter int unsigned Rows = 16,
  parameter int unsigned Cols = 16,
  parameter int unsigned KMax = 4096,
  parameter int unsigned AxiDataWidth = 256,
  localparam int unsigned AddrWidth = tsr_pkg::ADDR_BITS,
  localparam int unsigned BeatsWidth = tsr_pkg::BEATS_BITS,
  localparam int unsigned KW = $clog2(KMax),
  localparam int unsigned TagWidth = tsr_int_pkg::rd_tag_bits(KMax, AxiDataWidth)
) (
  input  logic                  clk_i,
  input  logic                  rst_ni,
  input  logic                  clear_i,
  input  logic                  abort_i,
  // the GEMM
  input  logic                  start_i,
  input  tsr_pkg::gemm_cfg_t    cfg_i,    // held from start_i until the GEMM is done
  input  logic                  bf16_i,   // BF16: two-byte A and B elements
  // descriptor fetch
  input  logic                  desc_req_valid_i,
  output logic                  desc_req_ready_o,
  input  logic [AddrWidth-1:0]  desc_req_addr_i,
  // slot fills (last beat arrived) and releases (consumer done), per slot
  input  logic [3:0]            a_fill_i,
  input  logic [1:0]            b_fill_i,
  input  logic [1:0]            c_fill_i,
  input  logic [3:0]            a_rel_i,
  input  logic [1:0]            b_rel_i,
  input  logic [1:0]            c_rel_i,
  input  logic [1:0]            p_rel_i,
  output logic [3:0]            a_full_o,
  output logic [1:0]            b_full_o,
  output logic [1:0]            c_full_o,
  // to the read master
  output logic                  req_valid_o,
  input  logic                  req_ready_i,
  output logic [AddrWidth-1:0]  req_addr_o,
  output logic [BeatsWidth-1:0] req_beats_o,
  output logic [TagWidth-1:0]   req_tag_o,
  output logic [BeatsWidth:0]   req_burst_o   // the request's first AXI burst (tsr_rd_arb)
);
  // ---------------------------------------------------------------- slot state
  logic [3:0] a_busy_q, a_full_q, a_claim;
  logic [1:0] b_busy_q, c_busy_q, p_busy_q;
  // The tables' slot needs no full flag: they arrive before the B panel of the same block.
  logic [1:0] b_full_q, c_full_q;
  logic [1:0] b_claim, c_claim;

  // ---------------------------------------------------------------- the loaders and the arbiter
  logic                  a_req_valid, a_grant, a_req_last;
  logic [1:0]            a_req_slot;
  logic                  b_req_valid, b_grant, b_req_slot, b_req_last;
  logic [AddrWidth-1:0]  a_req_addr, b_req_addr;
  logic [BeatsWidth-1:0] a_req_beats, b_req_beats;
  logic [2:0]            a_req_dest, b_req_dest;
  logic [KW-1:0]         a_req_idx, b_req_idx;

  tsr_loader_a #(.Rows(Rows), .Cols(Cols), .KMax(KMax), .AxiDataWidth(AxiDataWidth)) u_loader_a (
    .clk_i, .rst_ni, .clear_i, .abort_i, .start_i, .cfg_i, .bf16_i,
    .a_busy_i   (a_busy_q),
    .c_busy_i   (c_busy_q),
    .a_claim_o  (a_claim),
    .c_claim_o  (c_claim),
    .req_valid_o(a_req_valid),
    .grant_i    (a_grant),
    .req_addr_o (a_req_addr),
    .req_beats_o(a_req_beats),
    .req_dest_o (a_req_dest),
    .req_slot_o (a_req_slot),
    .req_idx_o  (a_req_idx),
    .req_last_o (a_req_last)
  );

  tsr_loader_b #(.Cols(Cols), .KMax(KMax), .AxiDataWidth(AxiDataWidth)) u_loader_b (
    .clk_i, .rst_ni, .clear_i, .abort_i, .start_i, .cfg_i, .bf16_i,
    .b_busy_i   (b_busy_q),
    .p_busy_i   (p_busy_q),
    .claim_o    (b_claim),
    .req_valid_o(b_req_valid),
    .grant_i    (b_grant),
    .req_addr_o (b_req_addr),
    .req_beats_o(b_req_beats),
    .req_dest_o (b_req_dest),
    .req_slot_o (b_req_slot),
    .req_idx_o  (b_req_idx),
    .req_last_o (b_req_last)
  );

  tsr_rd_arb #(.KMax(KMax), .AxiDataWidth(AxiDataWidth)) u_arb (
    .clk_i, .rst_ni,
    .desc_req_valid_i, .desc_req_ready_o, .desc_req_addr_i,
    .a_req_valid_i(a_req_valid), .a_grant_o(a_grant), .a_req_addr_i(a_req_addr),
    .a_req_beats_i(a_req_beats), .a_req_dest_i(a_req_dest), .a_req_slot_i(a_req_slot),
    .a_req_idx_i  (a_req_idx), .a_req_last_i(a_req_last),
    .b_req_valid_i(b_req_valid), .b_grant_o(b_grant), .b_req_addr_i(b_req_addr),
    .b_req_beats_i(b_req_beats), .b_req_dest_i(b_req_dest), .b_req_slot_i(b_req_slot),
    .b_req_idx_i  (b_req_idx), .b_req_last_i(b_req_last),
    .req_valid_o, .req_ready_i, .req_addr_o, .req_beats_o, .req_tag_o, .req_burst_o
  );

  // ---------------------------------------------------------------- slot flags
  logic [3:0] a_busy_d, a_full_d;
  logic [1:0] b_busy_d, c_busy_d, p_busy_d, b_full_d, c_full_d;
  always_comb begin
    a_busy_d = (a_busy_q | a_claim) & ~a_rel_i;
    b_busy_d = (b_busy_q | b_claim) & ~b_rel_i;
    p_busy_d = (p_busy_q | b_claim) & ~p_rel_i;
    c_busy_d = (c_busy_q | c_claim) & ~c_rel_i;
    a_full_d = (a_full_q | a_fill_i) & ~a_rel_i;
    b_full_d = (b_full_q | b_fill_i) & ~b_rel_i;
    c_full_d = (c_full_q | c_fill_i) & ~c_rel_i;
    if (clear_i) begin
      {a_busy_d, b_busy_d, p_busy_d, c_busy_d} = '0;
      {a_full_d, b_full_d, c_full_d} = '0;
    end
  end
  assign a_full_o = a_full_q;
  assign b_full_o = b_full_q;
  assign c_full_o = c_full_q;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      {a_busy_q, b_busy_q, p_busy_q, c_busy_q} <= '0;
      {a_full_q, b_full_q, c_full_q} <= '0;
    end else begin
      {a_busy_q, b_busy_q, p_busy_q, c_busy_q} <= {a_busy_d, b_busy_d, p_busy_d, c_busy_d};
      {a_full_q, b_full_q, c_full_q} <= {a_full_d, b_full_d, c_full_d};
    end
  end
endmodule
