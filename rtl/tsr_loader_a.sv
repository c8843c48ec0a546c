// A loader: per tile t (column blocks outer, row blocks inner), the tile's A rows and, with
// ACCUMULATE, its C_in rows into A slot t % 4 (tsr_int_pkg::a_quad) or t % 2 and C_in slot t % 2,
// once those are free. With resident A
// (tsr_int_pkg::resident_a) only the first column block's tiles load A, each row block at its own
// place in the banks, and the later column blocks reuse it. Requests carry a byte address;
// tsr_rd_arb aligns it to a beat and packs the read tag.
module tsr_loader_a #(
  parameter int unsigned Rows = 16,
  parameter int unsigned Cols = 16,
  parameter int unsigned KMax = 4096,
  parameter int unsigned AxiDataWidth = 256,
  localparam int unsigned AddrWidth = tsr_pkg::ADDR_BITS,
  localparam int unsigned BeatsWidth = tsr_pkg::BEATS_BITS,
  localparam int unsigned KW = $clog2(KMax)
) (
  input  logic                  clk_i,
  input  logic                  rst_ni,
  input  logic                  clear_i,
  input  logic                  abort_i,
  input  logic                  start_i,
  input  tsr_pkg::gemm_cfg_t    cfg_i,       // held from start_i until the GEMM is done
  input  logic                  bf16_i,      // an A row is 2K bytes
  // slots: A and C_in claimed and not yet released, per slot
  input  logic [3:0]            a_busy_i,
  input  logic [1:0]            c_busy_i,
  output logic [3:0]            a_claim_o,
  output logic [1:0]            c_claim_o,
  // read requests
  output logic                  req_valid_o,
  input  logic                  grant_i,
  output logic [AddrWidth-1:0]  req_addr_o,
  output logic [BeatsWidth-1:0] req_beats_o,
  output logic [2:0]            req_dest_o,  // tsr_int_pkg::DEST_*
  output logic [1:0]            req_slot_o,
  output logic [KW-1:0]         req_idx_o,   // row within the tile
  output logic                  req_last_o   // the slot is complete with this request
);
  localparam int unsigned BeatBytes = AxiDataWidth / 8;
  localparam int unsigned RowShift = $clog2(Rows);
  localparam int unsigned Seg4Beats = (Cols * 4 <= BeatBytes) ? 1 : (Cols * 4) / BeatBytes;
  localparam int unsigned BankBeats = 2 * KMax / BeatBytes;  // an A bank: both slots
  localparam int unsigned BankW = $clog2(BankBeats);

  typedef enum logic [1:0] {LaIdle, LaWait, LaRows, LaCin} state_e;
  state_e state_q, state_d;
  logic [1:0]  tile_q, tile_d;                  // the tile's A slot; its low bit is the C_in slot
  logic [15:0] rows_left_q, rows_left_d, cols_left_q, cols_left_d;
  logic [RowShift:0] i_q, i_d;
  logic [AddrWidth-1:0] a_tile_q, a_tile_d, c_col_q, c_col_d, c_tile_q, c_tile_d;
  logic [AddrWidth-1:0] row_q, row_d;
  logic [BankW-1:0] blk_beat_q, blk_beat_d;  // resident A: where the row block starts in the banks
  logic [BankW-1:0] a_beat;                  // where the tile's A rows go
  logic row_last, tile_last_m, a_resident, quad;
  logic [RowShift:0] last_i_q;  // the tile's last row: min(rows left, Rows) - 1
  logic [KW:0] k;
  logic [BeatsWidth-1:0] a_row_beats;

  assign k           = cfg_i.k[KW:0];
  // ceil(K x element bytes / beat bytes), and what follows from it: they depend on the GEMM alone,
  // so they are registered, the beats from the cycle after start_i and the rest from the one after
  // (the first request comes two cycles after start_i at the earliest), and the request's logic
  // begins at flip-flops.
  always_ff @(posedge clk_i) begin
    a_row_beats <= BeatsWidth'(tsr_int_pkg::beats_of(bf16_i ? 16'(k) << 1 : 16'(k), BeatBytes));
    a_resident  <= tsr_int_pkg::resident_a(cfg_i.accumulate, bf16_i, cfg_i.m, 16'(a_row_beats), Rows, BankBeats);
    quad        <= tsr_int_pkg::a_quad(bf16_i, 16'(a_row_beats), KMax, BeatBytes);
  end
  // The tile's rows follow from rows_left_q, which changes only as a tile's last row is requested,
  // and the next tile's rows are requested from a cycle after that (LaWait) at the earliest: so
  // they are registered, and the request's logic begins at flip-flops (issue #42).
  always_ff @(posedge clk_i) begin
    last_i_q    <= ((rows_left_q < 16'(Rows)) ? (RowShift+1)'(rows_left_q) : (RowShift+1)'(Rows)) - 1'b1;
    tile_last_m <= rows_left_q <= 16'(Rows);
  end
  assign row_last = i_q == last_i_q;
  assign a_beat      = a_resident ? blk_beat_q : quad ? {tile_q, (BankW-2)'(0)} : {tile_q[0], (BankW-1)'(0)};

  always_comb begin
    req_valid_o = 1'b0;
    req_addr_o  = row_q;
    req_beats_o = a_row_beats;
    req_dest_o  = '0;
    req_slot_o  = 2'd0;
    req_idx_o   = '0;
    req_last_o  = 1'b0;
    unique case (state_q)
      LaRows: begin
        req_valid_o = 1'b1;
        req_dest_o  = tsr_int_pkg::DEST_A;
        req_slot_o  = tile_q;
        req_idx_o   = KW'({a_beat, RowShift'(i_q)});
        req_last_o  = row_last;
      end
      LaCin: begin
        req_valid_o = 1'b1;
        req_beats_o = BeatsWidth'(Seg4Beats);
        req_dest_o  = tsr_int_pkg::DEST_CIN;
        req_slot_o  = {1'b0, tile_q[0]};
        req_idx_o   = KW'(i_q);
        req_last_o  = row_last;
      end
      default: ;
    endcase
  end

  always_comb begin
    state_d     = state_q;
    tile_d      = tile_q;
    rows_left_d = rows_left_q;
    cols_left_d = cols_left_q;
    i_d         = i_q;
    a_tile_d    = a_tile_q;
    c_col_d     = c_col_q;
    c_tile_d    = c_tile_q;
    row_d       = row_q;
    blk_beat_d  = blk_beat_q;
    a_claim_o   = 4'b0000;
    c_claim_o   = 2'b00;
    unique case (state_q)
      LaIdle: begin
        // The GEMM's terms are taken in every idle cycle, not only with start_i (the descriptor's,
        // in place before start_i): the start then only moves the state (issue #42).
        tile_d      = 2'd0;
        rows_left_d = cfg_i.m;
        cols_left_d = cfg_i.n;
        a_tile_d    = cfg_i.a_addr;
        c_col_d     = cfg_i.cin_addr;
        c_tile_d    = cfg_i.cin_addr;
        blk_beat_d  = '0;
        if (start_i) state_d = LaWait;
      end
      LaWait: begin
        if (cols_left_q == '0) begin
          state_d = LaIdle;
        end else if ((a_busy_i & tsr_int_pkg::onehot4(tile_q)) == '0 &&
                     !(cfg_i.accumulate && (c_busy_i & tsr_int_pkg::onehot2(tile_q[0])) != '0)) begin
          a_claim_o = tsr_int_pkg::onehot4(tile_q);
          c_claim_o = cfg_i.accumulate ? tsr_int_pkg::onehot2(tile_q[0]) : 2'b00;
          i_d     = '0;
          row_d   = a_tile_q;
          state_d = LaRows;
        end
      end
      LaRows, LaCin: begin
        if (grant_i) begin
          i_d   = i_q + 1'b1;
          row_d = row_q + ((state_q == LaRows) ? cfg_i.lda : cfg_i.ldcin);
          if (row_last && state_q == LaRows && cfg_i.accumulate) begin
            state_d = LaCin;
            i_d     = '0;
            row_d   = c_tile_q;
          end else if (row_last && a_resident && tile_last_m) begin
            state_d = LaIdle;  // the whole of A is in
          end else if (row_last) begin
            // next tile: row blocks inner, column blocks outer
            state_d = LaWait;
            tile_d  = tsr_int_pkg::a_next_slot(tile_q, quad);
            if (tile_last_m) begin
              rows_left_d = cfg_i.m;
              cols_left_d = (cols_left_q > 16'(Cols)) ? cols_left_q - 16'(Cols) : '0;
              a_tile_d    = cfg_i.a_addr;
              c_col_d     = c_col_q + AddrWidth'(Cols * 4);
              c_tile_d    = c_col_q + AddrWidth'(Cols * 4);
            end else begin
              rows_left_d = rows_left_q - 16'(Rows);
              a_tile_d    = a_tile_q + (cfg_i.lda << RowShift);
              blk_beat_d  = blk_beat_q + BankW'(a_row_beats);
              c_tile_d    = c_tile_q + (cfg_i.ldcin << RowShift);
            end
          end
        end
      end
      default: state_d = LaIdle;
    endcase
    if (clear_i || abort_i) state_d = LaIdle;
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) state_q <= LaIdle;
    else         state_q <= state_d;
  end

  // Datapath registers: no reset needed, the state machine says when they are meaningful.
  always_ff @(posedge clk_i) begin
    tile_q      <= tile_d;
    rows_left_q <= rows_left_d;
    cols_left_q <= cols_left_d;
    i_q         <= i_d;
    a_tile_q    <= a_tile_d;
    c_col_q     <= c_col_d;
    c_tile_q    <= c_tile_d;
    row_q       <= row_d;
    blk_beat_q  <= blk_beat_d;
  end
endmodule
