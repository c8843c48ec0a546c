// Rows x Cols output-stationary systolic array. A operands enter on the left (row i one cycle
// behind row i-1), B operands at the top (column j one cycle behind column j-1); PE (i, j) sees
// A[i][k] and B[k][j] together k + i + j cycles after the tile starts. row_o shows the finished
// sums of row row_sel_i (Cols x int32; Bf16: see below).
//
// FOLD (where Fold is set): the lower band of rows (Rows/2 and below) takes the upper band's A
// operands and controls, row for row, and its top row takes b2_i instead of the B operands coming
// down from above, so it computes the same rows of A against the next Cols columns of B.
//
// With Bf16 the operands are the scratchpad's fixed-point ones and each sum is a PE's 48-bit sum
// with its flags (tsr_pe); each row also keeps its A block ({NaN, exponent}, tsr_scratch) from the
// tile's last operand as PE (i, 0) keeps its sum, and row_blk_o shows row_sel_i's. FOLD is int8
// only, so b2_i stays a byte per column.
//
// Simulation builds can force bits of one PE's result register (fault_pe_i = row * Cols + col; all
// ones selects none), a stuck-at defect for the health checks to find. It is applied where that
// register is read, so the other PEs carry no extra logic and the simulation keeps its speed.
module tsr_array #(
  parameter int unsigned Rows = 16,
  parameter int unsigned Cols = 16,
  parameter bit          Fold = 1'b1,
  parameter bit          Bf16 = 1'b0,
  localparam int unsigned AW = Bf16 ? tsr_fp_pkg::OP_A_W : 8,
  localparam int unsigned BW = Bf16 ? tsr_fp_pkg::OP_B_W : 8,
  localparam int unsigned OutW = Bf16 ? tsr_fp_pkg::PE_OUT_W : 32,
  localparam int unsigned RowW = $clog2(Rows),
  localparam int unsigned Half = Rows / 2
) (
  input  logic                    clk_i,
  input  logic                    rst_ni,
  input  logic                    clear_i,
  input  logic [Rows*AW-1:0]      a_i,
  input  logic [Rows*9-1:0]       a_blk_i,   // Bf16: each row's A block, with its operands
  input  logic [Rows-1:0]         valid_i,
  input  logic [Rows-1:0]         first_i,
  input  logic [Rows-1:0]         last_i,
  input  logic [Cols*BW-1:0]      b_i,
  input  logic                    fold_i,
  input  logic [Cols*8-1:0]       b2_i,
  input  logic [RowW-1:0]         row_sel_i,
`ifndef SYNTHESIS
  input  logic [15:0]             fault_pe_i,
  input  logic [31:0]             fault_set_i,
  input  logic [31:0]             fault_clr_i,
`endif
  output logic [Cols*OutW-1:0]    row_o,
  output logic [8:0]              row_blk_o  // Bf16: row_sel_i's A block
);
  logic [OutW-1:0] sums [Rows*Cols];

  // Each PE's outputs are plain signals of its generate block, and its neighbours read them by
  // name: the simulator then keeps one copy of each forwarded register instead of a register and a
  // link array it copies into every cycle (the large preset simulated 25% faster).
  for (genvar i = 0; i < Rows; i++) begin : g_row
    for (genvar j = 0; j < Cols; j++) begin : g_col
      logic [AW-1:0] a_in, a_out;
      logic [BW-1:0] b_in, b_out;
      logic [2:0] ctl_in, ctl_out, ctl2_in;  // {valid, first, last}; ctl2: see tsr_pe
      if (j == 0 && Fold && i >= Half) begin : g_left_fold
        localparam int unsigned U = i - Half;  // the upper-band row this one repeats with FOLD
        assign a_in   = fold_i ? a_i[U*AW +: AW] : a_i[i*AW +: AW];
        assign ctl_in = fold_i ? {valid_i[U], first_i[U], last_i[U]} : {valid_i[i], first_i[i], last_i[i]};
      end else if (j == 0) begin : g_left
        assign a_in   = a_i[i*AW +: AW];
        assign ctl_in = {valid_i[i], first_i[i], last_i[i]};
      end else begin : g_inner_a
        assign a_in   = g_row[i].g_col[j-1].a_out;
        assign ctl_in = g_row[i].g_col[j-1].ctl_out;
      end
      if (j < Cols - 1) begin : g_ctl2
        assign ctl2_in = g_row[i].g_col[j+1].ctl_out;
      end else begin : g_ctl2_own
        assign ctl2_in = '0;
      end
      if (i == 0) begin : g_top
        assign b_in = b_i[j*BW +: BW];
      end else if (Fold && i == Half) begin : g_top_fold
        assign b_in = fold_i ? BW'($signed(b2_i[j*8 +: 8])) : g_row[i-1].g_col[j].b_out;  // Bf16: flags 0, int8 sign-extended
      end else begin : g_inner_b
        assign b_in = g_row[i-1].g_col[j].b_out;
      end

      tsr_pe #(.Bf16(Bf16), .OwnCtl2(j == Cols - 1)) u_pe (
        .clk_i,
        .rst_ni,
        .clear_i,
        .a_i    (a_in),
        .ctl_i  (ctl_in),
        .b_i    (b_in),
        .a_o    (a_out),
        .ctl_o  (ctl_out),
        .ctl2_i (ctl2_in),
        .b_o    (b_out),
        .out_o  (sums[i*Cols+j])
      );
      // The operands leaving the right and bottom edges go nowhere.
      if (j == Cols - 1) begin : g_right
        logic unused_right;
        assign unused_right = ^a_out ^ ^ctl_out;
      end
      if (i == Rows - 1) begin : g_bottom
        logic unused_bottom;
        assign unused_bottom = ^b_out;
      end
    end
  end

  if (!Fold) begin : g_no_fold
    logic unused_fold;
    assign unused_fold = fold_i ^ ^b2_i;
  end

  // Bf16: each row's A block, a cycle behind its operands into PE (i, 0) (as the product is) and
  // kept from the tile's last one (as the sum is), with PE (i, 0)'s control.
  if (Bf16) begin : g_blocks
    logic [8:0] row_blks [Rows];
    for (genvar i = 0; i < Rows; i++) begin : g_blk
      logic [8:0] blk1_q, blk2_q, keep_q;
      logic [2:0] ctl2;  // PE (i, 0)'s {valid, first, last}, aligned with its product
      if (Cols > 1) begin : g_shared
        assign ctl2 = g_row[i].g_col[1].ctl_out;
      end else begin : g_own
        logic [2:0] ctl2_q;
        always_ff @(posedge clk_i) ctl2_q <= g_row[i].g_col[0].ctl_out;
        assign ctl2 = ctl2_q;
      end
      always_ff @(posedge clk_i) begin
        blk1_q <= a_blk_i[i*9 +: 9];
        blk2_q <= blk1_q;
        if (ctl2[2] && ctl2[0]) keep_q <= blk2_q;
      end
      logic unused_first;
      assign unused_first = ctl2[1];
      assign row_blks[i] = keep_q;
    end
    assign row_blk_o = row_blks[row_sel_i];
  end else begin : g_no_blocks
    logic unused_blk;
    assign unused_blk = ^a_blk_i;
    assign row_blk_o = '0;
  end

`ifndef SYNTHESIS
  for (genvar j = 0; j < Cols; j++) begin : g_row_out
    logic [OutW-1:0] sum;
    logic [31:0] low;  // a fault forces bits of the sum's low 32 (Bf16: its flags and high bits stay)
    assign sum = sums[row_sel_i*Cols+j];
    assign low = fault_pe_i == 16'(row_sel_i*Cols+j) ? (sum[31:0] | fault_set_i) & ~fault_clr_i : sum[31:0];
    if (OutW > 32) begin : g_wide
      assign row_o[j*OutW +: OutW] = {sum[OutW-1:32], low};
    end else begin : g_narrow
      assign row_o[j*OutW +: OutW] = low;
    end
  end
`else
  // Synthesis selects a whole row: one Rows-way choice of a Cols*OutW-bit vector. The per-PE index
  // above is Cols choices among all Rows*Cols sums, which Yosys 0.23 turns into Rows*Cols*32-bit
  // shifters and lowers for hours on the large preset. Simulation keeps the per-PE form, which
  // fault injection needs and which simulates faster; scripts/equiv proves the two equal.
  logic [Cols*OutW-1:0] by_row [Rows];
  for (genvar i = 0; i < Rows; i++) begin : g_by_row
    for (genvar j = 0; j < Cols; j++) begin : g_by_col
      assign by_row[i][j*OutW +: OutW] = sums[i*Cols+j];
    end
  end
  assign row_o = by_row[row_sel_i];
`endif

endmodule
