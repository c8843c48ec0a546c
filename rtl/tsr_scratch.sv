// The scratchpads and the router that writes read data into them.
//  - A: one bank per array row, two slots of k_max bytes (or four of k_max / 2: tsr_int_pkg::a_quad),
//    written a beat at a time (at the beat the tag names: a slot's, or with resident A the row
//    block's) and read a byte per cycle (each row at its own, skewed, byte address);
//  - B: per array column, two byte-wide banks (lanes) of k_max entries, written a B row at a
//    time and read per column at skewed addresses. Lane s holds slot s; with FOLD a slot is half
//    of both lanes (k < k_max/2), lane 0 for the column block of the upper band of rows and lane 1
//    for the lower band's, which the same beat carries (b2_data_o);
//  - BF16 (Bf16 builds, bf16_i): an A element is two bytes at an even address, read as one 16-bit
//    word; a B element is two bytes of the beat, low byte into lane 0 and high byte into lane 1,
//    and a slot is half of both lanes, as with FOLD (K <= k_max/2 either way). As A rows and B rows
//    arrive, each A row's and B column's block ({NaN, the largest exponent}) is kept per slot, and
//    the operands leave as the array takes them: fixed-point values of their block with their
//    class (tsr_fp_pkg::fixed_operand); the epilogue reads the B columns' blocks with the tables;
//  - C_in: two slots of Rows rows of Cols int32, read one row per cycle by the epilogue;
//  - per column block: bias, multipliers and shifts, two slots, in registers.
// Shifts are range-checked as they arrive (ERR_PARAM names the first bad one).
module tsr_scratch #(
  parameter int unsigned Rows = 16,
  parameter int unsigned Cols = 16,
  parameter int unsigned KMax = 4096,
  parameter int unsigned AxiDataWidth = 256,
  parameter bit          Bf16 = 1'b0,
  localparam int unsigned AW = Bf16 ? tsr_fp_pkg::OP_A_W : 8,
  localparam int unsigned BW = Bf16 ? tsr_fp_pkg::OP_B_W : 8,
  localparam int unsigned FixAW = tsr_fp_pkg::FIX_A + 1,  // Bf16: an operand's signed value
  localparam int unsigned FixBW = tsr_fp_pkg::FIX_B + 1,
  localparam int unsigned AddrWidth = tsr_pkg::ADDR_BITS,
  localparam int unsigned BeatsWidth = tsr_pkg::BEATS_BITS,
  localparam int unsigned KW = $clog2(KMax),
  localparam int unsigned RowW = $clog2(Rows),
  localparam int unsigned TagWidth = tsr_int_pkg::rd_tag_bits(KMax, AxiDataWidth)
) (
  input  logic                       clk_i,
  input  logic                       rst_ni,
  input  logic                       fold_i,        // the GEMM's FOLD flag
  input  logic                       bf16_i,        // the GEMM's precision is BF16
  input  logic [KW:0]                k_i,           // the GEMM's K: an A row's elements
  // read data
  input  logic                       rsp_valid_i,
  input  logic [AxiDataWidth-1:0]    rsp_data_i,
  input  logic [TagWidth-1:0]        rsp_tag_i,
  input  logic [BeatsWidth-1:0]      rsp_beat_i,
  input  logic                       rsp_last_i,
  input  logic [AddrWidth-1:0]       rsp_addr_i,
  output logic [3:0]                 a_fill_o,
  output logic [1:0]                 b_fill_o,
  output logic [1:0]                 c_fill_o,
  output logic                       desc_valid_o,
  output logic                       perr_o,
  output logic [AddrWidth-1:0]       perr_addr_o,
  // array operand reads (data two cycles later)
  input  logic [Rows*(KW+1)-1:0]     a_rd_addr_i,   // byte in the bank: {slot, k}, or resident A's
  input  logic [Rows*2-1:0]          a_rd_slot_i,   // Bf16: the A slot of each bank's read
  output logic [Rows*AW-1:0]         a_data_o,
  output logic [Rows*9-1:0]          a_blk_o,       // Bf16: each bank's A block, with its data
  input  logic [Cols-1:0]            b_rd_slot_i,
  input  logic [Cols*KW-1:0]         b_rd_k_i,
  output logic [Cols*BW-1:0]         b_data_o,
  output logic [Cols*8-1:0]          b2_data_o,     // FOLD: the lower band's B operands
  // epilogue reads
  input  logic                       cin_rd_slot_i,
  input  logic [RowW-1:0]            cin_rd_row_i,
  output logic [Cols*32-1:0]         cin_data_o,    // the next cycle
  input  logic                       p_slot_i,      // bias and shifts
  input  logic                       m_slot_i,      // multipliers (the epilogue reads them a cycle later)
  output logic [Cols*32-1:0]         bias_o,
  output logic [Cols*32-1:0]         mult_o,
  output logic [Cols*8-1:0]          shift_o,
  output logic [Cols*9-1:0]          b_blk_o        // Bf16: the B columns' blocks, as bias_o
);
  localparam int unsigned BeatBytes = AxiDataWidth / 8;
  localparam int unsigned BeatShift = $clog2(BeatBytes);
  localparam int unsigned WordsPerSlot = KMax / BeatBytes;
  localparam int unsigned AWordW = $clog2(WordsPerSlot);
  localparam int unsigned BankW = AWordW + 1;
  localparam int unsigned IdxW = KW;
  localparam int unsigned RowBits = Cols * 32;
  localparam int unsigned CinBanks = (RowBits <= AxiDataWidth) ? 1 : RowBits / AxiDataWidth;
  localparam int unsigned CinW = RowBits / CinBanks;

  // Tag fields (see tsr_rd_arb's tag()): the slot is two bits for A's four, one for the others.
  logic [2:0]           t_dest;
  logic [1:0]           t_aslot;
  logic                 t_slot, t_last;
  logic [IdxW-1:0]      t_idx;
  logic [BeatShift-1:0] t_lane;
  assign {t_dest, t_aslot, t_idx, t_lane, t_last} = rsp_tag_i;
  assign t_slot = t_aslot[0];

  // The beat moved down so the addressed segment starts at bit 0.
  logic [AxiDataWidth-1:0] shifted;
  assign shifted = rsp_data_i >> {t_lane, 3'b000};

  logic is_a, is_b, is_cin, is_bias, is_mult, is_shift;
  assign is_a     = rsp_valid_i && t_dest == tsr_int_pkg::DEST_A;
  assign is_b     = rsp_valid_i && t_dest == tsr_int_pkg::DEST_B;
  assign is_cin   = rsp_valid_i && t_dest == tsr_int_pkg::DEST_CIN;
  assign is_bias  = rsp_valid_i && t_dest == tsr_int_pkg::DEST_BIAS;
  assign is_mult  = rsp_valid_i && t_dest == tsr_int_pkg::DEST_MULT;
  assign is_shift = rsp_valid_i && t_dest == tsr_int_pkg::DEST_SHIFT;
  assign desc_valid_o = rsp_valid_i && t_dest == tsr_int_pkg::DEST_DESC;

  always_comb begin
    a_fill_o = '0;
    b_fill_o = '0;
    c_fill_o = '0;
    if (rsp_valid_i && rsp_last_i && t_last) begin
      a_fill_o = is_a ? tsr_int_pkg::onehot4(t_aslot) : '0;
      b_fill_o = is_b ? tsr_int_pkg::onehot2(t_slot) : '0;
      c_fill_o = is_cin ? tsr_int_pkg::onehot2(t_slot) : '0;
    end
  end

  // ---------------------------------------------------------------- A banks
  // A bank's read data comes from a block RAM late in the cycle, too late to choose a byte of the
  // beat and reach the array in the same one (issue #42): the aligned 16-bit word holding the byte
  // is chosen within groups of words (the whole beat up to 16 words; 8 in a wider beat, whose 16
  // took three LUTs in a row on the large preset) and registered, and the group, the byte and the
  // array's input follow in the next cycle. The B
  // banks' data is registered likewise, so that both reach the array two cycles after the read.
  localparam int unsigned Words = AxiDataWidth / 16;
  localparam int unsigned GroupW = Words > 16 ? 3 : $clog2(Words);  // a word's index in its group
  localparam int unsigned Groups = Words >> GroupW;
  // Bf16: an A row's block so far (g_ablk below), into its bank's slot
  logic           ablk_we;
  logic [RowW-1:0] ablk_row;
  logic [1:0]     ablk_slot;
  logic [8:0]     ablk;
  for (genvar i = 0; i < Rows; i++) begin : g_abank
    logic [AxiDataWidth-1:0] mem [2*WordsPerSlot];
    logic [AxiDataWidth-1:0] rdata_q;
    logic [BeatShift-1:0]    byte_q;
    logic                    high_q;  // the byte is the word's high one
    logic [Groups*16-1:0]    pick_q;  // per group, the word at the byte's index within the group
    logic [15:0]             word;    // the aligned word holding the byte
    logic [KW:0]             ra;
    logic [BankW-1:0]        wbeat;
    // the tag's index is {the row's first beat in the bank, the row}
    assign wbeat = t_idx[RowW +: BankW] + rsp_beat_i[BankW-1:0];
    assign ra    = a_rd_addr_i[i*(KW+1) +: KW+1];
    always_ff @(posedge clk_i) begin
      if (is_a && t_idx[RowW-1:0] == RowW'(i)) mem[wbeat] <= rsp_data_i;
      rdata_q <= mem[ra[KW:BeatShift]];
      byte_q  <= ra[BeatShift-1:0];
      for (int g = 0; g < Groups; g++) pick_q[g*16 +: 16] <= rdata_q[(g * (1 << GroupW) + 32'(byte_q[GroupW:1])) * 16 +: 16];
      high_q  <= byte_q[0];
    end
    if (Groups > 1) begin : g_groups
      logic [BeatShift-GroupW-2:0] group_q;
      always_ff @(posedge clk_i) group_q <= byte_q[BeatShift-1:GroupW+1];
      assign word = pick_q[group_q * 16 +: 16];
    end else begin : g_group
      assign word = pick_q;
    end
    if (Bf16) begin : g_a16
      // The row's block per A slot, kept as its beats arrive (g_ablk below), read with the data.
      logic [8:0] blk_q [4];
      logic [1:0] slot1_q;
      logic [8:0] blk2_q;
      logic [tsr_fp_pkg::FIX_A+3:0] op;
      always_ff @(posedge clk_i) begin
        if (ablk_we && ablk_row == RowW'(i)) blk_q[ablk_slot] <= ablk;
        slot1_q <= a_rd_slot_i[i*2 +: 2];
        blk2_q  <= blk_q[slot1_q];
      end
      // a bf16 element as the array takes it, or the int8 one in its half, sign-extended
      assign op = tsr_fp_pkg::fixed_operand(word, blk2_q[7:0], tsr_fp_pkg::FIX_A - 8);
      assign a_data_o[i*AW +: AW] = bf16_i ? op : {3'b000, FixAW'($signed(high_q ? word[15:8] : word[7:0]))};
      assign a_blk_o[i*9 +: 9]    = blk2_q;
    end else begin : g_a8
      assign a_data_o[i*8 +: 8] = high_q ? word[15:8] : word[7:0];
      assign a_blk_o[i*9 +: 9]  = '0;
      logic unused_slot;
      assign unused_slot = ^a_rd_slot_i[i*2 +: 2];
    end
  end

  // A rows' blocks (Bf16): each beat's largest exponent among the row's elements (those past K
  // masked) and its NaNs, in a tree over the beat's elements; the bank keeps the row's running
  // block per slot. Three stages, so the block is in place a cycle before a read of the slot,
  // which can come two cycles after the slot's last beat, needs it (its data two cycles later).
  if (Bf16) begin : g_ablk
    localparam int unsigned Elems = AxiDataWidth / 16;
    localparam int unsigned Levels = $clog2(Elems);
    localparam int unsigned Early = Levels / 2;  // tree levels in stage 1
    logic signed [KW+2:0] left;                  // the row's elements from this beat on
    logic [Elems*9-1:0]   elem;                  // each element's {NaN, exponent}, 0 past K
    logic [(Levels+1)*Elems*9-1:0] lvl /*verilator split_var*/;  // level l at l*Elems*9: the maxima of 2^l elements each
    logic [(Elems>>Early)*9-1:0] part1_q;
    logic                 we1_q, first1_q, we2_q, first2_q;
    logic [RowW-1:0]      row1_q, row2_q;
    logic [1:0]           slot1_q, slot2_q;
    logic [8:0]           beat2_q;
    logic [8:0]           run_q;                 // the running block of the row arriving
    assign left = (KW+3)'(k_i) - (KW+3)'(rsp_beat_i) * (KW+3)'(Elems);
    for (genvar e = 0; e < Elems; e++) begin : g_elem
      assign elem[e*9 +: 9] = left > $signed((KW+3)'(e)) ? tsr_fp_pkg::block_of(rsp_data_i[e*16 +: 15]) : 9'd0;
    end
    assign lvl[0 +: Elems*9] = elem;
    for (genvar l = 1; l <= Levels; l++) begin : g_lvl
      localparam int unsigned Up = (l - 1) * Elems * 9, At = l * Elems * 9;  // levels l - 1 and l
      for (genvar n = 0; n < (Elems >> l); n++) begin : g_max
        if (l == Early + 1) begin : g_from_reg
          assign lvl[At + n*9 +: 9] = tsr_fp_pkg::block_max(part1_q[2*n*9 +: 9], part1_q[(2*n+1)*9 +: 9]);
        end else begin : g_comb
          assign lvl[At + n*9 +: 9] = tsr_fp_pkg::block_max(lvl[Up + 2*n*9 +: 9], lvl[Up + (2*n+1)*9 +: 9]);
        end
      end
      assign lvl[At + (Elems>>l)*9 +: (Elems - (Elems>>l))*9] = '0;
    end
    logic unused_lvl;  // the levels' unused tails, and those the registers skip
    assign unused_lvl = ^lvl;
    always_ff @(posedge clk_i) begin
      part1_q  <= lvl[Early*Elems*9 +: (Elems>>Early)*9];
      we1_q    <= is_a && bf16_i;
      first1_q <= rsp_beat_i == '0;
      row1_q   <= t_idx[RowW-1:0];
      slot1_q  <= t_aslot;
      beat2_q  <= lvl[Levels*Elems*9 +: 9];
      {we2_q, first2_q, row2_q, slot2_q} <= {we1_q, first1_q, row1_q, slot1_q};
      if (we2_q) run_q <= ablk;
    end
    // stage 3: the row's block so far, written into its bank's slot
    assign ablk      = first2_q ? beat2_q : tsr_fp_pkg::block_max(run_q, beat2_q);
    assign ablk_we   = we2_q;
    assign ablk_row  = row2_q;
    assign ablk_slot = slot2_q;
  end else begin : g_no_ablk
    assign {ablk_we, ablk_row, ablk_slot, ablk} = '0;
    logic unused_k;
    assign unused_k = ^k_i ^ ablk_we ^ ^ablk_row ^ ^ablk_slot ^ ^ablk;
  end

  // ---------------------------------------------------------------- B banks
  localparam bit FoldOk = tsr_int_pkg::fold_ok(Rows, Cols, AxiDataWidth);
  logic [KW-1:0] b_wr_k;
  logic          split;  // FOLD or BF16: a slot is half of both lanes
  assign split  = fold_i || (Bf16 && bf16_i);
  assign b_wr_k = split ? {t_slot, t_idx[KW-2:0]} : t_idx[KW-1:0];
  // Bf16: a B row's elements' {NaN, exponent}, a cycle after the beat, for the columns' blocks
  logic [Cols*9-1:0] bx1_q;
  logic              bwe1_q, bfirst1_q, bslot1_q;
  if (Bf16) begin : g_bx
    always_ff @(posedge clk_i) begin
      for (int j = 0; j < Cols; j++) bx1_q[j*9 +: 9] <= tsr_fp_pkg::block_of(shifted[j*16 +: 15]);
      bwe1_q    <= is_b && bf16_i;
      bfirst1_q <= t_idx[KW-2:0] == '0;
      bslot1_q  <= t_slot;
    end
  end else begin : g_no_bx
    assign {bx1_q, bwe1_q, bfirst1_q, bslot1_q} = '0;
    logic unused_bx;
    assign unused_bx = ^bx1_q ^ bwe1_q ^ bfirst1_q ^ bslot1_q;
  end
  for (genvar j = 0; j < Cols; j++) begin : g_bbank
    localparam int unsigned RawW = Bf16 ? 16 : 8;
    logic [7:0] lane0 [KMax];
    logic [7:0] lane1 [KMax];
    logic [7:0] rdata0_q, rdata1_q, wdata0, wdata1;
    logic [RawW-1:0] data_q;  // the element, registered (see the A banks)
    logic [7:0] data2_q;     // FOLD: the lower band's
    logic       slot_q;
    logic [KW-1:0] rk, rd_k;
    if (Bf16) begin : g_bf16
      // The column's block per slot, kept as its B rows arrive and read with the data; the
      // epilogue reads it with the tables (the slot is held until the column block's last row
      // leaves the epilogue, as theirs is).
      logic [8:0] blk_q [2];
      logic       rslot1_q;
      logic [7:0] blk2_q;
      logic [tsr_fp_pkg::FIX_A+3:0] op;
      logic       unused_op;  // the fixed value's high bits repeat its sign (|value| < 2^FIX_B)
      assign unused_op = ^op[tsr_fp_pkg::FIX_A:tsr_fp_pkg::FIX_B+1];
      assign wdata0 = bf16_i ? shifted[j*16 +: 8] : shifted[j*8 +: 8];
      assign wdata1 = bf16_i ? shifted[j*16+8 +: 8] : fold_i ? shifted[(Cols+j)*8 +: 8] : shifted[j*8 +: 8];
      always_ff @(posedge clk_i) begin
        data_q <= bf16_i ? {rdata1_q, rdata0_q} : {8'd0, slot_q ? rdata1_q : rdata0_q};
        if (bwe1_q) blk_q[bslot1_q] <= bfirst1_q ? bx1_q[j*9 +: 9] : tsr_fp_pkg::block_max(blk_q[bslot1_q], bx1_q[j*9 +: 9]);
        rslot1_q <= b_rd_slot_i[j];
        blk2_q   <= blk_q[rslot1_q][7:0];
      end
      // a bf16 element as the array takes it ({inf, zero, sign} and the low FIX_B + 1 bits of the
      // fixed value), or the int8 one sign-extended
      assign op = tsr_fp_pkg::fixed_operand(data_q, blk2_q, tsr_fp_pkg::FIX_B - 8);
      assign b_data_o[j*BW +: BW] = bf16_i ? {op[tsr_fp_pkg::FIX_A+3 -: 3], op[tsr_fp_pkg::FIX_B:0]}
                                           : {3'b000, FixBW'($signed(data_q[7:0]))};
      assign b_blk_o[j*9 +: 9] = blk_q[p_slot_i];
    end else begin : g_int8
      if (FoldOk) begin : g_fold
        assign wdata0 = shifted[j*8 +: 8];
        assign wdata1 = fold_i ? shifted[(Cols+j)*8 +: 8] : shifted[j*8 +: 8];
      end else begin : g_plain
        assign wdata0 = shifted[j*8 +: 8];
        assign wdata1 = shifted[j*8 +: 8];
      end
      always_ff @(posedge clk_i) data_q <= slot_q ? rdata1_q : rdata0_q;
      assign b_data_o[j*BW +: BW] = data_q;
      assign b_blk_o[j*9 +: 9]    = '0;
    end
    assign rk   = b_rd_k_i[j*KW +: KW];
    assign rd_k = split ? {b_rd_slot_i[j], rk[KW-2:0]} : rk;
    always_ff @(posedge clk_i) begin
      if (is_b && (split || !t_slot)) lane0[b_wr_k] <= wdata0;
      if (is_b && (split || t_slot))  lane1[b_wr_k] <= wdata1;
      rdata0_q <= lane0[rd_k];
      rdata1_q <= lane1[rd_k];
      slot_q   <= b_rd_slot_i[j] && !split;
    end
    always_ff @(posedge clk_i) data2_q <= rdata1_q;
    assign b2_data_o[j*8 +: 8] = data2_q;
  end

  // ---------------------------------------------------------------- C_in
  for (genvar b = 0; b < CinBanks; b++) begin : g_cin
    logic [CinW-1:0] mem [2*Rows];
    logic [CinW-1:0] rdata_q;
    logic            we;
    logic [CinW-1:0] wdata;
    assign we    = is_cin && (CinBanks == 1 || rsp_beat_i == BeatsWidth'(b));
    assign wdata = (CinBanks == 1) ? shifted[CinW-1:0] : rsp_data_i[CinW-1:0];
    always_ff @(posedge clk_i) begin
      if (we) mem[{t_slot, t_idx[RowW-1:0]}] <= wdata;
      rdata_q <= mem[{cin_rd_slot_i, cin_rd_row_i}];
    end
    assign cin_data_o[b*CinW +: CinW] = rdata_q;
  end

  // ---------------------------------------------------------------- per column block tables
  logic [RowBits-1:0] bias_q [2];
  logic [RowBits-1:0] mult_q [2];
  logic [Cols*8-1:0]  shift_q [2];
  for (genvar b = 0; b < CinBanks; b++) begin : g_tables
    logic [CinW-1:0] wdata;
    logic            beat_hit;
    assign beat_hit = CinBanks == 1 || rsp_beat_i == BeatsWidth'(b);
    assign wdata    = (CinBanks == 1) ? shifted[CinW-1:0] : rsp_data_i[CinW-1:0];
    always_ff @(posedge clk_i) begin
      if (is_bias && beat_hit) bias_q[t_slot][b*CinW +: CinW] <= wdata;
      if (is_mult && beat_hit) mult_q[t_slot][b*CinW +: CinW] <= wdata;
    end
  end
  always_ff @(posedge clk_i) begin
    if (is_shift) shift_q[t_slot] <= shifted[Cols*8-1:0];
  end
  assign bias_o  = bias_q[p_slot_i];
  assign mult_o  = mult_q[m_slot_i];
  assign shift_o = shift_q[p_slot_i];

  // Shift range check on arrival; t_idx holds the block's valid column count. In two registered
  // steps, each column's check and then the first failing one, whose address is their sum: the
  // error is raised two cycles after the table is written (the beat's alignment shift, the checks
  // and the choice in front of the controller were one of the paths that held the clock down,
  // issue #42).
  logic [Cols-1:0]       bad_q;         // per column: out of range
  logic [AddrWidth-1:0]  table_addr_q;  // the table's first byte
  logic                  perr;
  logic [$clog2(Cols):0] first_bad, first_bad_q;  // the first failing column
  logic [AddrWidth-1:0]  perr_base_q;
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      bad_q  <= '0;
      perr_o <= 1'b0;
    end else begin
      for (int j = 0; j < Cols; j++) begin
        bad_q[j] <= is_shift && IdxW'(j) < t_idx &&
                    ($signed(shifted[j*8 +: 8]) < $signed(8'(tsr_pkg::SHIFT_MIN)) ||
                     $signed(shifted[j*8 +: 8]) > $signed(8'(tsr_pkg::SHIFT_MAX)));
      end
      perr_o <= perr;
    end
  end
  // The first failing column from the lowest set bit (a carry chain) and an OR per index bit,
  // not a chain of priority muxes over the columns.
  logic [Cols-1:0] lowest_bad;
  assign lowest_bad = bad_q & (~bad_q + Cols'(1));
  always_comb begin
    perr      = bad_q != '0;
    first_bad = '0;
    for (int j = 0; j < Cols; j++) first_bad |= lowest_bad[j] ? ($clog2(Cols)+1)'(j) : '0;
  end
  always_ff @(posedge clk_i) begin
    table_addr_q <= rsp_addr_i + AddrWidth'(t_lane);
    perr_base_q  <= table_addr_q;
    first_bad_q  <= first_bad;
  end
  assign perr_addr_o = perr_base_q + AddrWidth'(first_bad_q);

endmodule
