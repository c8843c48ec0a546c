// Rows x Cols output-stationary systolic array. A operands enter on the left (row i one cycle
// behind row i-1), B operands at the top (column j one cycle behind column j-1); PE (i, j) sees
// A[i][k] and B[k][j] together k + i + j cycles after the tile starts. row_o shows the finished
// sums of row row_sel_i (Cols x int32).
//
// FOLD (where Fold is set): the lower band of rows (Rows/2 and below) takes the upper band's A
// operands and controls, row for row, and its top row takes b2_i instead of the B operands coming
// down from above, so it computes the same rows of A against the next Cols columns of B.
//
// With Bf16 the operands are 16 bits wide and bf16_i, the GEMM's precision, reaches every PE: bf16
// operands, fp32 sums (tsr_pe). FOLD is int8 only, so b2_i stays a byte per column.
//
// Simulation builds can force bits of one PE's result register (fault_pe_i = row * Cols + col; all
// ones selects none), a stuck-at defect for the health checks to find. It is applied where that
// register is read, so the other PEs carry no extra logic and the simulation keeps its speed.
module tsr_array #(
  parameter int unsigned Rows = 16,
  parameter int unsigned Cols = 16,
  parameter bit          Fold = 1'b1,
  parameter bit          Bf16 = 1'b0,
  localparam int unsigned OpW = Bf16 ? 16 : 8,
  localparam int unsigned RowW = $clog2(Rows),
  localparam int unsigned Half = Rows / 2
) (
  input  logic                    clk_i,
  input  logic                    rst_ni,
  input  logic                    clear_i,
  input  logic                    bf16_i,
  input  logic [Rows*OpW-1:0]     a_i,
  input  logic [Rows-1:0]         valid_i,
  input  logic [Rows-1:0]         first_i,
  input  logic [Rows-1:0]         last_i,
  input  logic [Cols*OpW-1:0]     b_i,
  input  logic                    fold_i,
  input  logic [Cols*8-1:0]       b2_i,
  input  logic [RowW-1:0]         row_sel_i,
`ifndef SYNTHESIS
  input  logic [15:0]             fault_pe_i,
  input  logic [31:0]             fault_set_i,
  input  logic [31:0]             fault_clr_i,
`endif
  output logic [Cols*32-1:0]      row_o
);
  logic [31:0] sums [Rows*Cols];

  // Each PE's outputs are plain signals of its generate block, and its neighbours read them by
  // name: the simulator then keeps one copy of each forwarded register instead of a register and a
  // link array it copies into every cycle (the large preset simulated 25% faster).
  for (genvar i = 0; i < Rows; i++) begin : g_row
    for (genvar j = 0; j < Cols; j++) begin : g_col
      logic [OpW-1:0] a_in, b_in, a_out, b_out;
      logic [2:0] ctl_in, ctl_out, ctl2_in;  // {valid, first, last}; ctl2: see tsr_pe
      if (j == 0 && Fold && i >= Half) begin : g_left_fold
        localparam int unsigned U = i - Half;  // the upper-band row this one repeats with FOLD
        assign a_in   = fold_i ? a_i[U*OpW +: OpW] : a_i[i*OpW +: OpW];
        assign ctl_in = fold_i ? {valid_i[U], first_i[U], last_i[U]} : {valid_i[i], first_i[i], last_i[i]};
      end else if (j == 0) begin : g_left
        assign a_in   = a_i[i*OpW +: OpW];
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
        assign b_in = b_i[j*OpW +: OpW];
      end else if (Fold && i == Half) begin : g_top_fold
        assign b_in = fold_i ? OpW'(b2_i[j*8 +: 8]) : g_row[i-1].g_col[j].b_out;
      end else begin : g_inner_b
        assign b_in = g_row[i-1].g_col[j].b_out;
      end

      tsr_pe #(.Bf16(Bf16), .OwnCtl2(j == Cols - 1)) u_pe (
        .clk_i,
        .rst_ni,
        .clear_i,
        .bf16_i,
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

`ifndef SYNTHESIS
  for (genvar j = 0; j < Cols; j++) begin : g_row_out
    logic [31:0] sum;
    assign sum = sums[row_sel_i*Cols+j];
    assign row_o[j*32 +: 32] = fault_pe_i == 16'(row_sel_i*Cols+j) ? (sum | fault_set_i) & ~fault_clr_i : sum;
  end
`else
  // Synthesis selects a whole row: one Rows-way choice of a Cols*32-bit vector. The per-PE index
  // above is Cols choices among all Rows*Cols sums, which Yosys 0.23 turns into Rows*Cols*32-bit
  // shifters and lowers for hours on the large preset. Simulation keeps the per-PE form, which
  // fault injection needs and which simulates faster; scripts/equiv proves the two equal.
  logic [Cols*32-1:0] by_row [Rows];
  for (genvar i = 0; i < Rows; i++) begin : g_by_row
    for (genvar j = 0; j < Cols; j++) begin : g_by_col
      assign by_row[i][j*32 +: 32] = sums[i*Cols+j];
    end
  end
  assign row_o = by_row[row_sel_i];
`endif

endmodule
