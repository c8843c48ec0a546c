// Read-request side of the engine. Two loaders walk the tile schedule ahead of the array:
//  - the B loader, per column block nb: requantization tables, bias, then K rows of B
//    (cols bytes each) into B/parameter slot nb % 2;
//  - the A loader, per tile t (column blocks outer, row blocks inner): the tile's A rows (and
//    C_in rows with ACCUMULATE) into A/C_in slot t % 2.
// A slot is claimed before its data is requested, marked full when its last beat arrives and
// released by the consumer, so the loaders fill one slot while the array reads the other.
// A round-robin arbiter shares the read master between the loaders; a descriptor fetch, which
// only happens between GEMMs, goes first.
module tsr_loader #(
  parameter int unsigned Rows = 16,
  parameter int unsigned Cols = 16,
  parameter int unsigned KMax = 4096,
  parameter int unsigned AxiDataWidth = 256,
  parameter int unsigned AddrWidth = 32,
  parameter int unsigned BeatsWidth = 16,
  localparam int unsigned KW = $clog2(KMax),
  localparam int unsigned BeatBytes = AxiDataWidth / 8,
  localparam int unsigned BeatShift = $clog2(BeatBytes),
  localparam int unsigned IdxW = KW,
  localparam int unsigned TagWidth = 3 + 1 + IdxW + BeatShift + 1  // see tag()
) (
  input  logic                  clk_i,
  input  logic                  rst_ni,
  input  logic                  clear_i,
  input  logic                  abort_i,
  // the GEMM
  input  logic                  start_i,
  input  logic [15:0]           m_i,
  input  logic [15:0]           n_i,
  input  logic [KW:0]           k_i,
  input  logic                  acc_i,
  input  logic                  bias_i,
  input  logic                  int8_i,
  input  logic [AddrWidth-1:0]  a_addr_i,
  input  logic [AddrWidth-1:0]  b_addr_i,
  input  logic [AddrWidth-1:0]  cin_addr_i,
  input  logic [AddrWidth-1:0]  bias_addr_i,
  input  logic [AddrWidth-1:0]  mult_addr_i,
  input  logic [AddrWidth-1:0]  shift_addr_i,
  input  logic [AddrWidth-1:0]  lda_i,
  input  logic [AddrWidth-1:0]  ldb_i,
  input  logic [AddrWidth-1:0]  ldcin_i,
  // descriptor fetch
  input  logic                  desc_req_valid_i,
  output logic                  desc_req_ready_o,
  input  logic [AddrWidth-1:0]  desc_req_addr_i,
  // slot fills (last beat arrived) and releases (consumer done), per slot
  input  logic [1:0]            a_fill_i,
  input  logic [1:0]            b_fill_i,
  input  logic [1:0]            c_fill_i,
  input  logic [1:0]            a_rel_i,
  input  logic [1:0]            b_rel_i,
  input  logic [1:0]            c_rel_i,
  input  logic [1:0]            p_rel_i,
  output logic [1:0]            a_full_o,
  output logic [1:0]            b_full_o,
  output logic [1:0]            c_full_o,
  // to the read master
  output logic                  req_valid_o,
  input  logic                  req_ready_i,
  output logic [AddrWidth-1:0]  req_addr_o,
  output logic [BeatsWidth-1:0] req_beats_o,
  output logic [TagWidth-1:0]   req_tag_o
);
  localparam int unsigned RowShift = $clog2(Rows);
  localparam int unsigned Seg4Beats = (Cols * 4 <= BeatBytes) ? 1 : (Cols * 4) / BeatBytes;
  localparam int unsigned DescBeats = tsr_pkg::DESC_BYTES / BeatBytes;

  // ---------------------------------------------------------------- slot state
  logic [1:0] a_busy_q, b_busy_q, c_busy_q, p_busy_q;
  // The tables' slot needs no full flag: they arrive before the B panel of the same block.
  logic [1:0] a_full_q, b_full_q, c_full_q;
  logic [1:0] a_claim, b_claim, c_claim;

  // ---------------------------------------------------------------- B loader
  typedef enum logic [2:0] {LbIdle, LbWait, LbMult, LbShift, LbBias, LbRows} lb_state_e;
  lb_state_e lb_state_q, lb_state_d;
  logic [15:0] lb_nb_q, lb_nb_d, lb_cols_left_q, lb_cols_left_d;
  logic [KW:0] lb_k_q, lb_k_d;
  logic [AddrWidth-1:0] lb_col_q, lb_col_d, lb_row_q, lb_row_d;    // B column block / B row
  logic [AddrWidth-1:0] lb_mult_q, lb_mult_d, lb_shift_q, lb_shift_d, lb_bias_q, lb_bias_d;
  logic lb_req_valid, lb_grant;
  logic [AddrWidth-1:0] lb_req_addr;
  logic [BeatsWidth-1:0] lb_req_beats;
  logic [TagWidth-1:0] lb_req_tag;
  logic lb_slot;
  logic [IdxW-1:0] lb_vc;

  assign lb_slot = lb_nb_q[0];
  assign lb_vc   = (lb_cols_left_q < 16'(Cols)) ? IdxW'(lb_cols_left_q) : IdxW'(Cols);

  // Read tag: destination, slot, row or k index, byte lane of the segment in its beat, and
  // whether this request completes the slot. tsr_scratch unpacks it.
  function automatic logic [TagWidth-1:0] tag(logic [2:0] dest, logic slot, logic [IdxW-1:0] idx,
                                              logic [BeatShift-1:0] lane, logic last);
    tag = TagWidth'({dest, slot, idx, lane, last});
  endfunction

  function automatic logic [AddrWidth-1:0] beat_align(logic [AddrWidth-1:0] addr);
    beat_align = addr & ~AddrWidth'(BeatBytes - 1);
  endfunction

  always_comb begin
    lb_req_valid = 1'b0;
    lb_req_addr  = '0;
    lb_req_beats = BeatsWidth'(1);
    lb_req_tag   = '0;
    unique case (lb_state_q)
      LbMult: begin
        lb_req_valid = 1'b1;
        lb_req_addr  = beat_align(lb_mult_q);
        lb_req_beats = BeatsWidth'(Seg4Beats);
        lb_req_tag   = tag(tsr_int_pkg::DEST_MULT, lb_slot, '0, lb_mult_q[BeatShift-1:0], 1'b0);
      end
      LbShift: begin
        lb_req_valid = 1'b1;
        lb_req_addr  = beat_align(lb_shift_q);
        lb_req_tag   = tag(tsr_int_pkg::DEST_SHIFT, lb_slot, lb_vc, lb_shift_q[BeatShift-1:0], 1'b0);
      end
      LbBias: begin
        lb_req_valid = 1'b1;
        lb_req_addr  = beat_align(lb_bias_q);
        lb_req_beats = BeatsWidth'(Seg4Beats);
        lb_req_tag   = tag(tsr_int_pkg::DEST_BIAS, lb_slot, '0, lb_bias_q[BeatShift-1:0], 1'b0);
      end
      LbRows: begin
        lb_req_valid = 1'b1;
        lb_req_addr  = beat_align(lb_row_q);
        lb_req_tag   = tag(tsr_int_pkg::DEST_B, lb_slot, lb_k_q[IdxW-1:0], lb_row_q[BeatShift-1:0], lb_k_q == k_i - 1'b1);
      end
      default: ;
    endcase
  end

  always_comb begin
    lb_state_d     = lb_state_q;
    lb_nb_d        = lb_nb_q;
    lb_cols_left_d = lb_cols_left_q;
    lb_k_d         = lb_k_q;
    lb_col_d       = lb_col_q;
    lb_row_d       = lb_row_q;
    lb_mult_d      = lb_mult_q;
    lb_shift_d     = lb_shift_q;
    lb_bias_d      = lb_bias_q;
    b_claim        = 2'b00;
    unique case (lb_state_q)
      LbIdle: begin
        if (start_i) begin
          lb_state_d     = LbWait;
          lb_nb_d        = '0;
          lb_cols_left_d = n_i;
          lb_col_d       = b_addr_i;
          lb_mult_d      = mult_addr_i;
          lb_shift_d     = shift_addr_i;
          lb_bias_d      = bias_addr_i;
        end
      end
      LbWait: begin
        if (lb_cols_left_q == '0) begin
          lb_state_d = LbIdle;
        end else if (!b_busy_q[lb_slot] && !p_busy_q[lb_slot]) begin
          b_claim[lb_slot] = 1'b1;
          lb_k_d     = '0;
          lb_row_d   = lb_col_q;
          lb_state_d = int8_i ? LbMult : (bias_i ? LbBias : LbRows);
        end
      end
      LbMult:  if (lb_grant) lb_state_d = LbShift;
      LbShift: if (lb_grant) lb_state_d = bias_i ? LbBias : LbRows;
      LbBias:  if (lb_grant) lb_state_d = LbRows;
      LbRows: begin
        if (lb_grant) begin
          lb_k_d   = lb_k_q + 1'b1;
          lb_row_d = lb_row_q + ldb_i;
          if (lb_k_q == k_i - 1'b1) begin
            lb_state_d     = LbWait;
            lb_nb_d        = lb_nb_q + 1'b1;
            lb_cols_left_d = (lb_cols_left_q > 16'(Cols)) ? lb_cols_left_q - 16'(Cols) : '0;
            lb_col_d       = lb_col_q + AddrWidth'(Cols);
            lb_mult_d      = lb_mult_q + AddrWidth'(Cols * 4);
            lb_shift_d     = lb_shift_q + AddrWidth'(Cols);
            lb_bias_d      = lb_bias_q + AddrWidth'(Cols * 4);
          end
        end
      end
      default: lb_state_d = LbIdle;
    endcase
    if (clear_i || abort_i) lb_state_d = LbIdle;
  end

  // ---------------------------------------------------------------- A loader
  typedef enum logic [1:0] {LaIdle, LaWait, LaRows, LaCin} la_state_e;
  la_state_e la_state_q, la_state_d;
  logic        la_tile_q, la_tile_d;                  // tile index parity = slot
  logic [15:0] la_rows_left_q, la_rows_left_d, la_cols_left_q, la_cols_left_d;
  logic [RowShift:0] la_i_q, la_i_d;
  logic [AddrWidth-1:0] la_a_tile_q, la_a_tile_d, la_c_col_q, la_c_col_d, la_c_tile_q, la_c_tile_d;
  logic [AddrWidth-1:0] la_row_q, la_row_d;
  logic la_req_valid, la_grant, la_row_last, la_tile_last_m;
  logic [AddrWidth-1:0] la_req_addr;
  logic [BeatsWidth-1:0] la_req_beats;
  logic [TagWidth-1:0] la_req_tag;
  logic [RowShift:0] la_vr;
  logic [BeatsWidth-1:0] a_row_beats;

  // ceil(K / beat bytes)
  assign a_row_beats    = BeatsWidth'(k_i[KW:BeatShift]) + BeatsWidth'(k_i[BeatShift-1:0] != '0);
  assign la_vr          = (la_rows_left_q < 16'(Rows)) ? (RowShift+1)'(la_rows_left_q) : (RowShift+1)'(Rows);
  assign la_row_last    = la_i_q == la_vr - 1'b1;
  assign la_tile_last_m = la_rows_left_q <= 16'(Rows);

  always_comb begin
    la_req_valid = 1'b0;
    la_req_addr  = beat_align(la_row_q);
    la_req_beats = a_row_beats;
    la_req_tag   = '0;
    unique case (la_state_q)
      LaRows: begin
        la_req_valid = 1'b1;
        la_req_tag   = tag(tsr_int_pkg::DEST_A, la_tile_q, IdxW'(la_i_q), la_row_q[BeatShift-1:0], la_row_last);
      end
      LaCin: begin
        la_req_valid = 1'b1;
        la_req_beats = BeatsWidth'(Seg4Beats);
        la_req_tag   = tag(tsr_int_pkg::DEST_CIN, la_tile_q, IdxW'(la_i_q), la_row_q[BeatShift-1:0], la_row_last);
      end
      default: ;
    endcase
  end

  always_comb begin
    la_state_d     = la_state_q;
    la_tile_d      = la_tile_q;
    la_rows_left_d = la_rows_left_q;
    la_cols_left_d = la_cols_left_q;
    la_i_d         = la_i_q;
    la_a_tile_d    = la_a_tile_q;
    la_c_col_d     = la_c_col_q;
    la_c_tile_d    = la_c_tile_q;
    la_row_d       = la_row_q;
    a_claim        = 2'b00;
    c_claim        = 2'b00;
    unique case (la_state_q)
      LaIdle: begin
        if (start_i) begin
          la_state_d     = LaWait;
          la_tile_d      = 1'b0;
          la_rows_left_d = m_i;
          la_cols_left_d = n_i;
          la_a_tile_d    = a_addr_i;
          la_c_col_d     = cin_addr_i;
          la_c_tile_d    = cin_addr_i;
        end
      end
      LaWait: begin
        if (la_cols_left_q == '0) begin
          la_state_d = LaIdle;
        end else if (!a_busy_q[la_tile_q] && !(acc_i && c_busy_q[la_tile_q])) begin
          a_claim[la_tile_q] = 1'b1;
          c_claim[la_tile_q] = acc_i;
          la_i_d     = '0;
          la_row_d   = la_a_tile_q;
          la_state_d = LaRows;
        end
      end
      LaRows, LaCin: begin
        if (la_grant) begin
          la_i_d   = la_i_q + 1'b1;
          la_row_d = la_row_q + ((la_state_q == LaRows) ? lda_i : ldcin_i);
          if (la_row_last && la_state_q == LaRows && acc_i) begin
            la_state_d = LaCin;
            la_i_d     = '0;
            la_row_d   = la_c_tile_q;
          end else if (la_row_last) begin
            // next tile: row blocks inner, column blocks outer
            la_state_d = LaWait;
            la_tile_d  = !la_tile_q;
            if (la_tile_last_m) begin
              la_rows_left_d = m_i;
              la_cols_left_d = (la_cols_left_q > 16'(Cols)) ? la_cols_left_q - 16'(Cols) : '0;
              la_a_tile_d    = a_addr_i;
              la_c_col_d     = la_c_col_q + AddrWidth'(Cols * 4);
              la_c_tile_d    = la_c_col_q + AddrWidth'(Cols * 4);
            end else begin
              la_rows_left_d = la_rows_left_q - 16'(Rows);
              la_a_tile_d    = la_a_tile_q + (lda_i << RowShift);
              la_c_tile_d    = la_c_tile_q + (ldcin_i << RowShift);
            end
          end
        end
      end
      default: la_state_d = LaIdle;
    endcase
    if (clear_i || abort_i) la_state_d = LaIdle;
  end

  // ---------------------------------------------------------------- arbiter
  logic rr_q, rr_d;   // 1: the A loader goes first
  logic pick_a;
  assign desc_req_ready_o = req_ready_i;
  assign pick_a   = la_req_valid && (rr_q || !lb_req_valid);
  assign la_grant = !desc_req_valid_i && pick_a && req_ready_i;
  assign lb_grant = !desc_req_valid_i && !pick_a && lb_req_valid && req_ready_i;
  always_comb begin
    if (desc_req_valid_i) begin
      req_valid_o = 1'b1;
      req_addr_o  = desc_req_addr_i;
      req_beats_o = BeatsWidth'(DescBeats);
      req_tag_o   = tag(tsr_int_pkg::DEST_DESC, 1'b0, '0, '0, 1'b1);
    end else if (pick_a) begin
      req_valid_o = 1'b1;
      req_addr_o  = la_req_addr;
      req_beats_o = la_req_beats;
      req_tag_o   = la_req_tag;
    end else begin
      req_valid_o = lb_req_valid;
      req_addr_o  = lb_req_addr;
      req_beats_o = lb_req_beats;
      req_tag_o   = lb_req_tag;
    end
    rr_d = rr_q;
    if (la_grant) rr_d = 1'b0;
    if (lb_grant) rr_d = 1'b1;
  end

  // ---------------------------------------------------------------- slot flags
  logic [1:0] a_busy_d, b_busy_d, c_busy_d, p_busy_d, a_full_d, b_full_d, c_full_d;
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
      lb_state_q     <= LbIdle;
      la_state_q     <= LaIdle;
      rr_q           <= 1'b0;
      {a_busy_q, b_busy_q, p_busy_q, c_busy_q} <= '0;
      {a_full_q, b_full_q, c_full_q} <= '0;
    end else begin
      lb_state_q     <= lb_state_d;
      la_state_q     <= la_state_d;
      rr_q           <= rr_d;
      {a_busy_q, b_busy_q, p_busy_q, c_busy_q} <= {a_busy_d, b_busy_d, p_busy_d, c_busy_d};
      {a_full_q, b_full_q, c_full_q} <= {a_full_d, b_full_d, c_full_d};
    end
  end

  // Datapath registers: no reset needed, their state machines say when they are meaningful.
  always_ff @(posedge clk_i) begin
    lb_nb_q        <= lb_nb_d;
    lb_cols_left_q <= lb_cols_left_d;
    lb_k_q         <= lb_k_d;
    lb_col_q       <= lb_col_d;
    lb_row_q       <= lb_row_d;
    lb_mult_q      <= lb_mult_d;
    lb_shift_q     <= lb_shift_d;
    lb_bias_q      <= lb_bias_d;
    la_tile_q      <= la_tile_d;
    la_rows_left_q <= la_rows_left_d;
    la_cols_left_q <= la_cols_left_d;
    la_i_q         <= la_i_d;
    la_a_tile_q    <= la_a_tile_d;
    la_c_col_q     <= la_c_col_d;
    la_c_tile_q    <= la_c_tile_d;
    la_row_q       <= la_row_d;
  end
endmodule
