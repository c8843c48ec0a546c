// Shares the read master: a descriptor fetch (only between GEMMs) goes first, then the A and B
// loaders take turns (round robin). Aligns each request to a beat and packs its read tag, which
// tsr_scratch unpacks: destination, slot, row or k index, the byte lane where the data starts in
// its beat, and whether this request completes the slot. Each request's first AXI burst is worked
// out beside the choice among them (tsr_first_burst), so that the read master's registered burst
// does not wait for the choice's decode.
module tsr_rd_arb #(
  parameter int unsigned KMax = 4096,
  parameter int unsigned AxiDataWidth = 256,
  localparam int unsigned AddrWidth = tsr_pkg::ADDR_BITS,
  localparam int unsigned BeatsWidth = tsr_pkg::BEATS_BITS,
  localparam int unsigned KW = $clog2(KMax),
  localparam int unsigned BeatShift = $clog2(AxiDataWidth / 8),
  localparam int unsigned TagWidth = tsr_int_pkg::rd_tag_bits(KMax, AxiDataWidth)
) (
  input  logic                  clk_i,
  input  logic                  rst_ni,
  // descriptor fetch
  input  logic                  desc_req_valid_i,
  output logic                  desc_req_ready_o,
  input  logic [AddrWidth-1:0]  desc_req_addr_i,
  // the A loader
  input  logic                  a_req_valid_i,
  output logic                  a_grant_o,
  input  logic [AddrWidth-1:0]  a_req_addr_i,
  input  logic [BeatsWidth-1:0] a_req_beats_i,
  input  logic [2:0]            a_req_dest_i,
  input  logic [1:0]            a_req_slot_i,
  input  logic [KW-1:0]         a_req_idx_i,
  input  logic                  a_req_last_i,
  // the B loader
  input  logic                  b_req_valid_i,
  output logic                  b_grant_o,
  input  logic [AddrWidth-1:0]  b_req_addr_i,
  input  logic [BeatsWidth-1:0] b_req_beats_i,
  input  logic [2:0]            b_req_dest_i,
  input  logic                  b_req_slot_i,
  input  logic [KW-1:0]         b_req_idx_i,
  input  logic                  b_req_last_i,
  // to the read master
  output logic                  req_valid_o,
  input  logic                  req_ready_i,
  output logic [AddrWidth-1:0]  req_addr_o,
  output logic [BeatsWidth-1:0] req_beats_o,
  output logic [TagWidth-1:0]   req_tag_o,
  output logic [BeatsWidth:0]   req_burst_o   // the first burst: {it is the request's last, else its beats}
);
  localparam int unsigned DescBeats = tsr_pkg::DESC_BYTES / (AxiDataWidth / 8);

  function automatic logic [TagWidth-1:0] tag(logic [2:0] dest, logic [1:0] slot, logic [KW-1:0] idx,
                                              logic [BeatShift-1:0] lane, logic last);
    tag = TagWidth'({dest, slot, idx, lane, last});
  endfunction


  logic rr_q, rr_d;   // 1: the A loader goes first
  logic pick_a;
  assign desc_req_ready_o = req_ready_i;
  assign pick_a    = a_req_valid_i && (rr_q || !b_req_valid_i);
  assign a_grant_o = !desc_req_valid_i && pick_a && req_ready_i;
  assign b_grant_o = !desc_req_valid_i && !pick_a && b_req_valid_i && req_ready_i;

  localparam int unsigned PageW = $clog2(tsr_pkg::PAGE_BYTES);
  logic [BeatsWidth:0] desc_burst, a_burst, b_burst;
  tsr_first_burst #(.DataWidth(AxiDataWidth)) u_desc_burst (
    .beats_i(BeatsWidth'(DescBeats)), .page_offset_i({desc_req_addr_i[PageW-1:BeatShift], BeatShift'(0)}),
    .last_o(desc_burst[BeatsWidth]), .cap_o(desc_burst[BeatsWidth-1:0])
  );
  tsr_first_burst #(.DataWidth(AxiDataWidth)) u_a_burst (
    .beats_i(a_req_beats_i), .page_offset_i({a_req_addr_i[PageW-1:BeatShift], BeatShift'(0)}),
    .last_o(a_burst[BeatsWidth]), .cap_o(a_burst[BeatsWidth-1:0])
  );
  tsr_first_burst #(.DataWidth(AxiDataWidth)) u_b_burst (
    .beats_i(b_req_beats_i), .page_offset_i({b_req_addr_i[PageW-1:BeatShift], BeatShift'(0)}),
    .last_o(b_burst[BeatsWidth]), .cap_o(b_burst[BeatsWidth-1:0])
  );

  always_comb begin
    if (desc_req_valid_i) begin
      req_valid_o = 1'b1;
      req_addr_o  = desc_req_addr_i;
      req_beats_o = BeatsWidth'(DescBeats);
      req_tag_o   = tag(tsr_int_pkg::DEST_DESC, 2'd0, '0, '0, 1'b1);
      req_burst_o = desc_burst;
    end else if (pick_a) begin
      req_valid_o = 1'b1;
      req_addr_o  = {a_req_addr_i[AddrWidth-1:BeatShift], BeatShift'(0)};  // the beat's address
      req_beats_o = a_req_beats_i;
      req_tag_o   = tag(a_req_dest_i, a_req_slot_i, a_req_idx_i, a_req_addr_i[BeatShift-1:0], a_req_last_i);
      req_burst_o = a_burst;
    end else begin
      req_valid_o = b_req_valid_i;
      req_addr_o  = {b_req_addr_i[AddrWidth-1:BeatShift], BeatShift'(0)};
      req_beats_o = b_req_beats_i;
      req_tag_o   = tag(b_req_dest_i, {1'b0, b_req_slot_i}, b_req_idx_i, b_req_addr_i[BeatShift-1:0], b_req_last_i);
      req_burst_o = b_burst;
    end
    rr_d = rr_q;
    if (a_grant_o) rr_d = 1'b0;
    if (b_grant_o) rr_d = 1'b1;
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) rr_q <= 1'b0;
    else         rr_q <= rr_d;
  end
endmodule
