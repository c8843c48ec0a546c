// Tile sequencer, operand skew, readout and epilogue.
//
// Tiles run column blocks outer, row blocks inner (the order the loaders fill slots in). A tile
// starts once its A, B (and C_in) slots are full and the output FIFO has room for its rows; it
// then streams K operand tokens, one per cycle, into a chain of registers. Stage s of the chain
// addresses A bank s and B bank s, which gives the systolic skew without delaying operand bytes.
// Because each PE keeps its finished sum in out_q while it starts the next one, tiles stream back
// to back: a tile may start max(K, Rows, Cols) cycles after the previous one, and row r of a tile
// is read Cols + 4 + r cycles after its last token, before the next tile overwrites it.
//
// With FOLD a tile is one row block of at most Rows/2 rows against 2 x Cols columns: the array's
// lower band repeats the upper band's rows against the second Cols columns (tsr_array), and the
// readout stores row r of the lower band as row r - Rows/2 of those columns. The lower band
// finishes with the upper one but is read Rows/2 cycles later, so tiles are at least
// Cols + Rows/2 cycles apart.
//
// A BF16 GEMM that adds both a C_in and a bias reads a row every other cycle: the epilogue has one
// fp32 adder per lane, which adds a row's C_in in its stages 3-5 and its bias in stages 6-8
// (tsr_epilogue). Rows two cycles apart never need it in the same cycle; tiles are then at least
// max(2 Rows + 2, Rows + Cols - 1) cycles apart, so that a tile's first row enters the epilogue
// four or more cycles after the previous tile's last (never three), and the last row of a tile is
// read before the next tile overwrites it.
//
// With BF16 an A element is two bytes (the banks' byte address advances by 2 a token), and C
// elements are 4 bytes (FP32) or 2 (BF16); the walk and its timing are those of int8, but tiles
// whose A rows fit in a quarter of a bank take A slots 0-3 in turn (tsr_int_pkg::a_quad).
module tsr_seq #(
  parameter int unsigned Rows = 16,
  parameter int unsigned Cols = 16,
  parameter int unsigned KMax = 4096,
  parameter int unsigned AxiDataWidth = 256,
  parameter bit          Bf16 = 1'b0,
  localparam int unsigned AddrWidth = tsr_pkg::ADDR_BITS,
  localparam int unsigned KW = $clog2(KMax),
  localparam int unsigned RowW = $clog2(Rows),
  localparam int unsigned ColW = $clog2(Cols),
  localparam int unsigned SumW = Bf16 ? tsr_fp_pkg::PE_OUT_W : 32  // a PE's result
) (
  input  logic                    clk_i,
  input  logic                    rst_ni,
  input  logic                    clear_i,
  input  logic                    abort_i,
  // the GEMM
  input  logic                    start_i,
  input  tsr_pkg::gemm_cfg_t      cfg_i,    // held from start_i until done_o
  input  logic                    bf16_i,   // the GEMM's precision is BF16 (Bf16 builds)
  // slots
  input  logic [3:0]              a_full_i,
  input  logic [1:0]              b_full_i,
  input  logic [1:0]              c_full_i,
  output logic [3:0]              a_rel_o,
  output logic [1:0]              b_rel_o,
  output logic [1:0]              c_rel_o,
  output logic [1:0]              p_rel_o,
  // scratchpad operand reads
  output logic [Rows*(KW+1)-1:0]  a_rd_addr_o,  // per A bank: the byte to read
  output logic [Rows*2-1:0]       a_rd_slot_o,  // per A bank: its slot (Bf16: the row's block)
  output logic [Cols-1:0]         b_rd_slot_o,
  output logic [Cols*KW-1:0]      b_rd_k_o,
  // the array
  output logic [Rows-1:0]         row_valid_o,
  output logic [Rows-1:0]         row_first_o,
  output logic [Rows-1:0]         row_last_o,
  output logic [RowW-1:0]         row_sel_o,
  input  logic [Cols*SumW-1:0]    row_i,
  input  logic [8:0]              row_blk_i,   // Bf16: the row's A block
  // epilogue operands
  output logic                    cin_rd_slot_o,
  output logic [RowW-1:0]         cin_rd_row_o,
  input  logic [Cols*32-1:0]      cin_data_i,
  output logic                    p_slot_o,   // the tables of the row entering the epilogue
  output logic                    m_slot_o,   // the multipliers' of the row in its stage 1
  input  logic [Cols*32-1:0]      bias_i,
  input  logic [Cols*32-1:0]      mult_i,
  input  logic [Cols*8-1:0]       shift_i,
  input  logic [Cols*9-1:0]       b_blk_i,     // Bf16: the columns' B blocks, as bias_i
  // finished rows to the store unit
  output logic                    out_valid_o,
  output logic [Cols*32-1:0]      out_data_o,
  output logic [AddrWidth-1:0]    out_addr_o,
  output logic [ColW:0]           out_cols_o,
  input  logic                    out_pop_i,   // the store unit freed one row of its FIFO
  output logic                    stall_o,
  output logic                    done_o,
  // counted actions (tsr_ctrl's counters)
  output logic                    step_o,           // the array takes one k of a tile
  output logic                    tile_o,           // a tile starts
  output logic [15:0]             spad_rd_bytes_o   // scratchpad bytes read in the previous cycle
);
  localparam int unsigned Chain = ((Rows > Cols + 4) ? Rows : Cols + 4);
  localparam int unsigned Credits = tsr_pkg::STORE_ROWS_PER_ARRAY_ROW * Rows;  // the store unit's FIFO depth
  localparam int unsigned GapMax = (Rows > Cols) ? Rows : Cols;
  localparam int unsigned Half = Rows / 2;
  localparam int unsigned GapFold = (Rows > Cols + Half) ? Rows : Cols + Half;
  localparam int unsigned GapPair = (2 * Rows + 2 > Rows + Cols - 1) ? 2 * Rows + 2 : Rows + Cols - 1;
  localparam int unsigned BeatBytes = AxiDataWidth / 8;
  localparam int unsigned BeatShift = $clog2(BeatBytes);
  localparam int unsigned BankBeats = 2 * KMax / BeatBytes;  // an A bank: both slots

  // ---------------------------------------------------------------- tile walk
  logic        running_q, running_d;
  logic [1:0]  tile_q, tile_d;                         // the tile's A slot; its low bit is the C_in slot
  logic [15:0] cols_blk_q, cols_blk_d;                 // column block index: B slot parity
  logic [15:0] rows_left_q, rows_left_d, cols_left_q, cols_left_d;
  logic [AddrWidth-1:0] c_col_q, c_col_d, c_tile_q, c_tile_d;
  logic        streaming_q, streaming_d;
  logic [KW:0] k_q, k_d;
  logic [KW:0] gap_q, gap_d, gap_min;   // tile interval: max(K, gap_min)
  logic [$clog2(Credits):0] credits_q, credits_d;
  // kept apart (Yosys would fold the choice among them back into one adder behind the handshakes)
  (* keep *) logic [$clog2(Credits):0] credits_inc, credits_tile, credits_inc_tile;
  logic        cur_bslot, cur_nblast, cur_final;
  logic [KW:0] k;
  logic        int8;
  logic [1:0]  out_shift;                 // log2 of C's element bytes
  logic [RowW:0] cur_vr, cur_rows;
  logic [ColW+1:0] cur_vc;
  logic        fold;
  logic        pair;      // BF16 with C_in and a bias: a row every other cycle into the epilogue
  logic [15:0] blk_cols;  // columns per tile: Cols, or 2 x Cols with FOLD
  logic        start_tile, emit, tiles_left, a_resident, a_wait, a_quad;
  logic [KW:0] emit_k;
  logic [15:0] a_row_beats;               // ceil(K / beat bytes): resident A's row pitch
  logic [KW:0] a_blk_q, a_blk_d, a_base;  // where the tile's A rows start in the banks, in bytes
  logic [1:0]  tok_aslot_d;
  logic        tok_bslot_d, tok_nblast_d;

  assign k          = cfg_i.k[KW:0];
  assign int8       = cfg_i.out_mode == tsr_pkg::OUT_INT8;
  assign out_shift  = tsr_int_pkg::out_shift(cfg_i.out_mode);
  assign cur_bslot  = cols_blk_q[0];
  assign fold       = cfg_i.fold;
  assign blk_cols   = fold ? 16'(2 * Cols) : 16'(Cols);
  assign pair       = Bf16 && bf16_i && cfg_i.accumulate && cfg_i.bias;
  assign gap_min    = fold ? (KW+1)'(GapFold) : pair ? (KW+1)'(GapPair) : (KW+1)'(GapMax);
  // The next tile's rows and columns, registered: they follow from rows_left_q and cols_left_q,
  // which change only as a tile starts, and the next one starts max(Rows, Cols) cycles later at
  // the earliest (gap_q), or after the GEMM's first cycle (fresh_q). Their comparisons in front of the tile's
  // start were one of the paths that held the clock down (issue #42).
  logic [RowW:0] vr;
  logic          fresh_q;  // the GEMM started in the previous cycle: the values are not in yet
  assign vr = (rows_left_q < 16'(Rows)) ? (RowW+1)'(rows_left_q) : (RowW+1)'(Rows);
  always_ff @(posedge clk_i) begin
    cur_vr     <= vr;
    cur_vc     <= (cols_left_q < blk_cols) ? (ColW+2)'(cols_left_q) : (ColW+2)'(blk_cols);
    // rows the tile hands the store unit: both bands' with FOLD where the lower band has columns
    cur_rows   <= (fold && cols_left_q > 16'(Cols)) ? vr << 1 : vr;
    cur_nblast <= rows_left_q <= 16'(Rows);
    cur_final  <= rows_left_q <= 16'(Rows) && cols_left_q <= blk_cols;
  end
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) fresh_q <= 1'b0;
    else         fresh_q <= start_i;
  end
  assign tiles_left = running_q && cols_left_q != '0;


  // Tile info for the readout: {vr, vc, c address, cslot, pslot, nblast, final}
  localparam int unsigned InfoW = (RowW + 1) + (ColW + 2) + AddrWidth + 4;
  logic [InfoW-1:0] info_in, info_out;
  logic info_full, info_empty, info_pop;
  logic [2:0] info_count;

  // A tile starts when its operands are in, the array is free and its rows have room to go.
  assign start_tile = tiles_left && !abort_i && !streaming_q && gap_q == '0 && !fresh_q &&
                      ((a_full_i & tsr_int_pkg::onehot4(tile_q)) != '0 || !a_wait) &&
                      (b_full_i & tsr_int_pkg::onehot2(cur_bslot)) != '0 &&
                      (!cfg_i.accumulate || (c_full_i & tsr_int_pkg::onehot2(tile_q[0])) != '0) &&
                      credits_q >= ($clog2(Credits)+1)'(cur_rows) && !info_full;
  assign emit       = start_tile || streaming_q;
  assign emit_k     = start_tile ? '0 : k_q;
  assign info_in    = {cur_vr, cur_vc, c_tile_q, tile_q[0], cur_bslot, cur_nblast, cur_final};
  // Resident A (tsr_loader_a loads it in the first column block, each row block at its own place):
  // the first column block's tiles wait for and release their slots as usual, the later ones read
  // their row block's A rows where they were left. These follow from the GEMM alone, so they are
  // registered in two steps, as in tsr_loader_a: the descriptor is decoded two cycles before
  // start_i, so they are valid from the cycle after it, before the first tile can start, and the
  // tile start's logic begins at flip-flops.
  always_ff @(posedge clk_i) begin
    a_row_beats <= tsr_int_pkg::beats_of(Bf16 && bf16_i ? 16'(k) << 1 : 16'(k), BeatBytes);
    a_resident  <= tsr_int_pkg::resident_a(cfg_i.accumulate, Bf16 && bf16_i, cfg_i.m, a_row_beats, Rows, BankBeats);
    a_quad      <= tsr_int_pkg::a_quad(Bf16 && bf16_i, a_row_beats, KMax, BeatBytes);
  end
  assign a_base      = a_resident ? a_blk_q : a_quad ? {tile_q, (KW-1)'(0)} : {tile_q[0], KW'(0)};
  assign a_wait      = !a_resident || cols_blk_q == '0;

  assign credits_inc      = credits_q + 1'b1;
  assign credits_tile     = credits_q - ($clog2(Credits)+1)'(cur_rows);
  assign credits_inc_tile = credits_inc - ($clog2(Credits)+1)'(cur_rows);

  always_comb begin
    running_d   = running_q;
    tile_d      = tile_q;
    rows_left_d = rows_left_q;
    cols_left_d = cols_left_q;
    cols_blk_d  = cols_blk_q;
    c_col_d     = c_col_q;
    c_tile_d    = c_tile_q;
    streaming_d = streaming_q;
    a_blk_d     = a_blk_q;
    k_d         = k_q;
    gap_d       = (gap_q != '0) ? gap_q - 1'b1 : gap_q;
    // a credit back for a row the store unit took, less the rows of a tile starting: the sums are
    // formed from flip-flops and the late handshakes only choose among them
    credits_d   = out_pop_i ? credits_inc : credits_q;

    if (streaming_q) begin
      k_d = k_q + 1'b1;
      if (k_q == k - 1'b1) streaming_d = 1'b0;
    end
    if (start_tile) begin
      // The first token goes out now; a tile with K = 1 has no more.
      streaming_d = k != (KW+1)'(1);
      k_d         = (KW+1)'(1);
      gap_d       = ((k > gap_min) ? k : gap_min) - 1'b1;
      credits_d   = out_pop_i ? credits_inc_tile : credits_tile;
      tile_d      = tsr_int_pkg::a_next_slot(tile_q, a_quad);
      a_blk_d     = a_blk_q + (KW+1)'(a_row_beats << BeatShift);
      if (cur_nblast) begin
        a_blk_d     = '0;
        rows_left_d = cfg_i.m;
        cols_left_d = (cols_left_q > blk_cols) ? cols_left_q - blk_cols : '0;
        cols_blk_d  = cols_blk_q + 1'b1;
        c_col_d     = c_col_q + (AddrWidth'(blk_cols) << out_shift);
        c_tile_d    = c_col_d;
      end else begin
        rows_left_d = rows_left_q - 16'(Rows);
        c_tile_d    = c_tile_q + (cfg_i.ldc << RowW);
      end
    end
    if (done_o) running_d = 1'b0;
    if (start_i) begin
      running_d   = 1'b1;
      tile_d      = 2'd0;
      rows_left_d = cfg_i.m;
      cols_left_d = cfg_i.n;
      cols_blk_d  = '0;
      a_blk_d     = '0;
      c_col_d     = cfg_i.c_addr;
      c_tile_d    = cfg_i.c_addr;
      streaming_d = 1'b0;
      gap_d       = '0;
      credits_d   = ($clog2(Credits)+1)'(Credits);
    end
    if (clear_i) begin
      running_d   = 1'b0;
      streaming_d = 1'b0;
      gap_d       = '0;
    end
  end

  assign stall_o = tiles_left && !emit && gap_q == '0;

  // ---------------------------------------------------------------- operand token chain
  logic [Chain-1:0]    tok_valid_q, tok_first_q, tok_last_q, tok_bslot_q;
  logic [Cols-1:0]     tok_nblast_q;
  logic [Rows-1:0]     tok_arel_q;  // the tile releases its A slot (not a resident A's later tiles)
  logic [1:0]          tok_aslot_q [Rows];
  logic [KW-1:0]       tok_k_q [Chain];
  logic [KW:0]         tok_ak_q [Rows];  // the A banks' byte address of the token

  // The slot and block flags of the tile being streamed are held from its start.
  logic [1:0] str_aslot_q;
  logic str_bslot_q, str_nblast_q, str_arel_q, tok_arel_d;
  logic [KW:0] str_abase_q;
  assign tok_aslot_d  = start_tile ? tile_q : str_aslot_q;
  assign tok_arel_d   = start_tile ? a_wait : str_arel_q;
  assign tok_bslot_d  = start_tile ? cur_bslot : str_bslot_q;
  assign tok_nblast_d = start_tile ? cur_nblast : str_nblast_q;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      tok_valid_q <= '0;
    end else if (clear_i) begin
      tok_valid_q <= '0;
    end else begin
      tok_valid_q <= {tok_valid_q[Chain-2:0], emit};
    end
  end
  always_ff @(posedge clk_i) begin
    tok_first_q  <= {tok_first_q[Chain-2:0], emit_k == '0};
    tok_last_q   <= {tok_last_q[Chain-2:0], emit_k == k - 1'b1};
    // The stages the slot releases come from are written only with a token: that keeps them out
    // of the shift registers (SRLs) the stages before them become, whose outputs are late.
    tok_aslot_q[0] <= tok_aslot_d;
    for (int s = 1; s < Rows - 1; s++) tok_aslot_q[s] <= tok_aslot_q[s-1];
    if (tok_valid_q[Rows-2]) tok_aslot_q[Rows-1] <= tok_aslot_q[Rows-2];
    tok_bslot_q  <= {tok_bslot_q[Chain-2:0], tok_bslot_d};
    tok_nblast_q[Cols-2:0] <= {tok_nblast_q[Cols-3:0], tok_nblast_d};
    if (tok_valid_q[Cols-2]) tok_nblast_q[Cols-1] <= tok_nblast_q[Cols-2];
    tok_arel_q[Rows-2:0] <= {tok_arel_q[Rows-3:0], tok_arel_d};
    if (tok_valid_q[Rows-2]) tok_arel_q[Rows-1] <= tok_arel_q[Rows-2];
    tok_k_q[0]   <= emit_k[KW-1:0];
    for (int s = 1; s < Chain; s++) tok_k_q[s] <= tok_k_q[s-1];
    tok_ak_q[0]  <= (start_tile ? a_base : str_abase_q) + (Bf16 && bf16_i ? emit_k << 1 : emit_k);
    for (int s = 1; s < Rows; s++) tok_ak_q[s] <= tok_ak_q[s-1];
    if (start_tile) begin
      str_aslot_q  <= tile_q;
      str_bslot_q  <= cur_bslot;
      str_nblast_q <= cur_nblast;
      str_arel_q   <= a_wait;
      str_abase_q  <= a_base;
    end
  end

  for (genvar i = 0; i < Rows; i++) begin : g_arow
    logic v1_q, v_q, f1_q, f_q, l1_q, l_q;
    assign a_rd_addr_o[i*(KW+1) +: KW+1] = tok_ak_q[i];
    assign a_rd_slot_o[i*2 +: 2]         = tok_aslot_q[i];
    // Row flags reach the array with the bank's data, two cycles after the read (tsr_scratch).
    always_ff @(posedge clk_i or negedge rst_ni) begin
      if (!rst_ni) {v1_q, v_q} <= '0;
      else if (clear_i) {v1_q, v_q} <= '0;
      else {v1_q, v_q} <= {tok_valid_q[i], v1_q};
    end
    always_ff @(posedge clk_i) begin
      {f1_q, f_q} <= {tok_first_q[i], f1_q};
      {l1_q, l_q} <= {tok_last_q[i], l1_q};
    end
    assign row_valid_o[i] = v_q;
    assign row_first_o[i] = f_q;
    assign row_last_o[i]  = l_q;
  end
  for (genvar j = 0; j < Cols; j++) begin : g_bcol
    assign b_rd_slot_o[j]       = tok_bslot_q[j];
    assign b_rd_k_o[j*KW +: KW] = tok_k_q[j];
  end

  always_comb begin
    a_rel_o = '0;
    b_rel_o = '0;
    if (tok_valid_q[Rows-1] && tok_last_q[Rows-1] && tok_arel_q[Rows-1]) a_rel_o = tsr_int_pkg::onehot4(tok_aslot_q[Rows-1]);
    if (tok_valid_q[Cols-1] && tok_last_q[Cols-1] && tok_nblast_q[Cols-1]) b_rel_o = tsr_int_pkg::onehot2(tok_bslot_q[Cols-1]);
  end

  // ---------------------------------------------------------------- readout
  tsr_fifo #(.Width(InfoW), .Depth(tsr_pkg::INFO_DEPTH)) u_info (
    .clk_i, .rst_ni, .clear_i,
    .push_i (start_tile),
    .data_i (info_in),
    .full_o (info_full),
    .pop_i  (info_pop),
    .data_o (info_out),
    .empty_o(info_empty),
    .count_o(info_count)
  );

  logic ro_start, ro_active_q, ro_active_d, ro_on;
  logic ro_hold_q;  // pair: the cycle after a row, in which the readout waits
  logic [RowW-1:0] ro_row_q, ro_row_d, ro_row;
  logic [InfoW-1:0] ro_info_q, ro_info_d, ro_info;
  logic [AddrWidth-1:0] ro_addr_q, ro_addr_d, ro_addr;
  logic [RowW:0] ro_vr;
  logic [ColW+1:0] ro_vc;
  logic ro_lower, ro_store;             // FOLD: the row is in the lower band; the row is stored
  logic [RowW-1:0] ro_band_row;         // its row within its band
  logic [ColW:0] ro_cols;
  logic [AddrWidth-1:0] ro_tile_addr;
  logic ro_cslot, ro_pslot, ro_nblast, ro_final;

  // Stage Cols + 4's token, as a flag of its own: the stages before it become a shift register
  // (SRL), whose output is late.
  logic ro_start_q;
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) ro_start_q <= 1'b0;
    else         ro_start_q <= !clear_i && tok_valid_q[Cols+3] && tok_last_q[Cols+3];
  end
  assign ro_start = ro_start_q;
  assign info_pop = ro_start;
  assign ro_on    = ro_start || (ro_active_q && !ro_hold_q);
  assign ro_row   = ro_start ? '0 : ro_row_q;
  assign ro_info  = ro_start ? info_out : ro_info_q;
  assign {ro_vr, ro_vc, ro_tile_addr, ro_cslot, ro_pslot, ro_nblast, ro_final} = ro_info;
  assign ro_addr  = ro_start ? ro_tile_addr : ro_addr_q;
  assign ro_lower    = cfg_i.fold && ro_row >= RowW'(Half);
  assign ro_band_row = ro_lower ? ro_row - RowW'(Half) : ro_row;
  assign ro_store    = (RowW+1)'(ro_band_row) < ro_vr && (!ro_lower || ro_vc > (ColW+2)'(Cols));
  always_comb begin
    if (ro_lower)                     ro_cols = (ColW+1)'(ro_vc - (ColW+2)'(Cols));
    else if (ro_vc > (ColW+2)'(Cols)) ro_cols = (ColW+1)'(Cols);
    else                              ro_cols = (ColW+1)'(ro_vc);
  end

  always_comb begin
    ro_active_d = ro_active_q;
    ro_row_d    = ro_row_q;
    ro_info_d   = ro_info;
    // the lower band's rows start at the tile's second Cols columns (int32 with FOLD)
    ro_addr_d   = ro_hold_q && !ro_start ? ro_addr_q :
                  (cfg_i.fold && ro_row == RowW'(Half - 1)) ? ro_tile_addr + AddrWidth'(Cols * 4)
                                                            : ro_addr + cfg_i.ldc;
    if (ro_on) begin
      ro_active_d = ro_row != RowW'(Rows - 1);
      ro_row_d    = ro_row + 1'b1;
    end
    if (clear_i) ro_active_d = 1'b0;
  end

  assign row_sel_o     = ro_row;
  assign cin_rd_slot_o = ro_cslot;
  assign cin_rd_row_o  = ro_row;

  // Epilogue stage 0: the selected row of finished sums and its metadata.
  // meta: {store, addr, cols, release, nblast, cslot, pslot, final}
  localparam int unsigned MetaW = 1 + AddrWidth + (ColW + 1) + 5;
  logic              e_valid_q;
  logic [Cols*SumW-1:0] e_sum_q;
  logic [8:0]        e_blk_q;
  logic [MetaW-1:0]   e_meta_q, x_meta;
  logic              x_valid;
  logic [Cols*32-1:0] x_data;
  logic              x_store, x_rel, x_nblast, x_cslot, x_pslot, x_final;
  logic [AddrWidth-1:0] x_addr;
  logic [ColW:0]     x_cols;

  // BF16: each sum's sign and magnitude (tsr_fp_pkg::fixed_abs), the epilogue's first step taken
  // here, after the row's selection
  logic [Cols*SumW-1:0] row_sum;
  if (Bf16) begin : g_abs
    for (genvar j = 0; j < Cols; j++) begin : g_col
      assign row_sum[j*SumW +: SumW] = bf16_i ? tsr_fp_pkg::fixed_abs(row_i[j*SumW +: SumW]) : row_i[j*SumW +: SumW];
    end
  end else begin : g_int
    assign row_sum = row_i;
  end
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) e_valid_q <= 1'b0;
    else if (clear_i) e_valid_q <= 1'b0;
    else e_valid_q <= ro_on;
  end
  always_ff @(posedge clk_i) begin
    e_sum_q  <= row_sum;
    e_blk_q  <= row_blk_i;
    e_meta_q <= {ro_store, ro_addr, ro_cols, ro_row == RowW'(Rows - 1),
                 ro_nblast, ro_cslot, ro_pslot, ro_final};
  end
  assign p_slot_o = e_meta_q[1];
  always_ff @(posedge clk_i) m_slot_o <= e_meta_q[1];

  tsr_epilogue #(.Cols(Cols), .MetaWidth(MetaW), .Bf16(Bf16)) u_epilogue (
    .clk_i, .rst_ni, .clear_i,
    .valid_i  (e_valid_q),
    .meta_i   (e_meta_q),
    .sum_i    (e_sum_q),
    .row_blk_i(e_blk_q),
    .b_blk_i,
    .cin_i    (cin_data_i),
    .bias_i   (bias_i),
    .mult_i   (mult_i),
    .shift_i  (shift_i),
    .cfg_i,
    .bf16_i,
    .valid_o  (x_valid),
    .meta_o   (x_meta),
    .data_o   (x_data)
  );

  assign {x_store, x_addr, x_cols, x_rel, x_nblast, x_cslot, x_pslot, x_final} = x_meta;
  assign out_valid_o = x_valid && x_store;
  assign out_data_o  = x_data;
  assign out_addr_o  = x_addr;
  assign out_cols_o  = x_cols;

  // Every step reads an element from each A bank and one per column from the B banks (two with
  // FOLD; a byte each, two with BF16); every row through the epilogue reads its C_in row and the
  // tables it uses.
  localparam int unsigned StepBytes = Rows + Cols;
  logic [15:0] step_bytes, row_bytes;
  logic        emit_q;  // a step a cycle ago: its bytes are counted from a flip-flop
  assign step_bytes = !emit_q ? '0 : Bf16 && bf16_i ? 16'(2 * StepBytes) : 16'(StepBytes) + (fold ? 16'(Cols) : 16'd0);
  assign row_bytes  = !e_valid_q ? '0 :
                      (cfg_i.accumulate ? 16'(Cols * 4) : 16'd0) + (cfg_i.bias ? 16'(Cols * 4) : 16'd0) +
                      (int8 ? 16'(Cols * 5) : 16'd0);
  assign step_o          = emit;
  assign tile_o          = start_tile;
  // Registered: for the SPAD_RD_BYTES counter alone (the sum behind the tile's start was one of the
  // paths that held the clock down, issue #42). The clear lands with rows still in the array.
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      emit_q          <= 1'b0;
      spad_rd_bytes_o <= '0;
    end else if (clear_i) begin
      emit_q          <= 1'b0;
      spad_rd_bytes_o <= '0;
    end else begin
      emit_q          <= emit;
      spad_rd_bytes_o <= step_bytes + row_bytes;
    end
  end

  logic done_q, done_d;
  always_comb begin
    c_rel_o = '0;
    p_rel_o = '0;
    if (x_valid && x_rel && cfg_i.accumulate) c_rel_o = tsr_int_pkg::onehot2(x_cslot);
    if (x_valid && x_rel && x_nblast)         p_rel_o = tsr_int_pkg::onehot2(x_pslot);
    done_d = done_q;
    if (x_valid && x_rel && x_final) done_d = 1'b1;
    if (start_i || clear_i) done_d = 1'b0;
  end
  assign done_o = done_q;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      running_q   <= 1'b0;
      streaming_q <= 1'b0;
      gap_q       <= '0;
      credits_q   <= '0;
      ro_active_q <= 1'b0;
      ro_hold_q   <= 1'b0;
      done_q      <= 1'b0;
    end else begin
      running_q   <= running_d;
      streaming_q <= streaming_d;
      gap_q       <= gap_d;
      credits_q   <= credits_d;
      ro_active_q <= ro_active_d;
      ro_hold_q   <= !clear_i && pair && ro_on;
      done_q      <= done_d;
    end
  end
  always_ff @(posedge clk_i) begin
    tile_q      <= tile_d;
    rows_left_q <= rows_left_d;
    cols_left_q <= cols_left_d;
    cols_blk_q  <= cols_blk_d;
    c_col_q     <= c_col_d;
    c_tile_q    <= c_tile_d;
    a_blk_q     <= a_blk_d;
    k_q         <= k_d;
    ro_row_q    <= ro_row_d;
    ro_info_q   <= ro_info_d;
    ro_addr_q   <= ro_addr_d;
  end

  logic unused_info;
  always_comb begin
    unused_info = ^info_count ^ info_empty ^ x_rel ^ tok_first_q[Chain-1];
    for (int s = GapMax; s < Chain; s++) unused_info ^= ^tok_k_q[s];
  end
endmodule
