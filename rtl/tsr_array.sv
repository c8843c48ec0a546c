// Rows x Cols output-stationary systolic array. A operands enter on the left (row i one cycle
// behind row i-1), B operands at the top (column j one cycle behind column j-1); PE (i, j) sees
// A[i][k] and B[k][j] together k + i + j cycles after the tile starts. row_o shows the finished
// sums of row row_sel_i (Cols x int32).
//
// Simulation builds can force bits of one PE's result register (fault_pe_i = row * Cols + col; all
// ones selects none), a stuck-at defect for the health checks to find. It is applied where that
// register is read, so the other PEs carry no extra logic and the simulation keeps its speed.
module tsr_array #(
  parameter int unsigned Rows = 16,
  parameter int unsigned Cols = 16,
  localparam int unsigned RowW = $clog2(Rows)
) (
  input  logic                    clk_i,
  input  logic                    rst_ni,
  input  logic                    clear_i,
  input  logic [Rows*8-1:0]       a_i,
  input  logic [Rows-1:0]         valid_i,
  input  logic [Rows-1:0]         first_i,
  input  logic [Rows-1:0]         last_i,
  input  logic [Cols*8-1:0]       b_i,
  input  logic [RowW-1:0]         row_sel_i,
`ifndef SYNTHESIS
  input  logic [15:0]             fault_pe_i,
  input  logic [31:0]             fault_set_i,
  input  logic [31:0]             fault_clr_i,
`endif
  output logic [Cols*32-1:0]      row_o
);
  // Links between neighbours: Cols+1 per row (horizontal), Rows+1 per column (vertical).
  // Unpacked, so a simulator moves them as words rather than as one wide vector.
  logic [7:0]  a_link [Rows*(Cols+1)];
  logic        v_link [Rows*(Cols+1)];
  logic        f_link [Rows*(Cols+1)];
  logic        l_link [Rows*(Cols+1)];
  logic [7:0]  b_link [(Rows+1)*Cols];
  logic [31:0] sums   [Rows*Cols];

  for (genvar i = 0; i < Rows; i++) begin : g_row_in
    assign a_link[i*(Cols+1)] = a_i[i*8 +: 8];
    assign v_link[i*(Cols+1)] = valid_i[i];
    assign f_link[i*(Cols+1)] = first_i[i];
    assign l_link[i*(Cols+1)] = last_i[i];
  end
  for (genvar j = 0; j < Cols; j++) begin : g_col_in
    assign b_link[j] = b_i[j*8 +: 8];
  end

  for (genvar i = 0; i < Rows; i++) begin : g_row
    for (genvar j = 0; j < Cols; j++) begin : g_col
      tsr_pe u_pe (
        .clk_i,
        .rst_ni,
        .clear_i,
        .a_i    (a_link[i*(Cols+1)+j]),
        .valid_i(v_link[i*(Cols+1)+j]),
        .first_i(f_link[i*(Cols+1)+j]),
        .last_i (l_link[i*(Cols+1)+j]),
        .b_i    (b_link[i*Cols+j]),
        .a_o    (a_link[i*(Cols+1)+j+1]),
        .valid_o(v_link[i*(Cols+1)+j+1]),
        .first_o(f_link[i*(Cols+1)+j+1]),
        .last_o (l_link[i*(Cols+1)+j+1]),
        .b_o    (b_link[(i+1)*Cols+j]),
        .out_o  (sums[i*Cols+j])
      );
    end
  end

  for (genvar j = 0; j < Cols; j++) begin : g_row_out
`ifndef SYNTHESIS
    logic [31:0] sum;
    assign sum = sums[row_sel_i*Cols+j];
    assign row_o[j*32 +: 32] = fault_pe_i == 16'(row_sel_i*Cols+j) ? (sum | fault_set_i) & ~fault_clr_i : sum;
`else
    assign row_o[j*32 +: 32] = sums[row_sel_i*Cols+j];
`endif
  end

  // The links leaving the right and bottom edges go nowhere.
  logic unused_edges;
  always_comb begin
    unused_edges = 1'b0;
    for (int i = 0; i < Rows; i++) begin
      unused_edges ^= ^a_link[i*(Cols+1)+Cols] ^ v_link[i*(Cols+1)+Cols] ^
                      f_link[i*(Cols+1)+Cols] ^ l_link[i*(Cols+1)+Cols];
    end
    for (int j = 0; j < Cols; j++) unused_edges ^= ^b_link[Rows*Cols+j];
  end
endmodule
