// Rows x Cols output-stationary systolic array. A operands enter on the left (row i one cycle
// behind row i-1), B operands at the top (column j one cycle behind column j-1); PE (i, j) sees
// A[i][k] and B[k][j] together k + i + j cycles after the tile starts. All finished sums are
// visible on out_o (row-major, Cols x int32 per row).
module tsr_array #(
  parameter int unsigned Rows = 16,
  parameter int unsigned Cols = 16
) (
  input  logic                    clk_i,
  input  logic                    rst_ni,
  input  logic                    clear_i,
  input  logic [Rows*8-1:0]       a_i,
  input  logic [Rows-1:0]         valid_i,
  input  logic [Rows-1:0]         first_i,
  input  logic [Rows-1:0]         last_i,
  input  logic [Cols*8-1:0]       b_i,
  output logic [Rows*Cols*32-1:0] out_o
);
  // Horizontal links: Cols+1 per row; vertical: Rows+1 per column.
  logic [Rows*(Cols+1)*8-1:0] a_link;
  logic [Rows*(Cols+1)-1:0]   v_link, f_link, l_link;
  logic [(Rows+1)*Cols*8-1:0] b_link;

  for (genvar i = 0; i < Rows; i++) begin : g_row_in
    assign a_link[(i*(Cols+1))*8 +: 8] = a_i[i*8 +: 8];
    assign v_link[i*(Cols+1)]          = valid_i[i];
    assign f_link[i*(Cols+1)]          = first_i[i];
    assign l_link[i*(Cols+1)]          = last_i[i];
  end
  for (genvar j = 0; j < Cols; j++) begin : g_col_in
    assign b_link[j*8 +: 8] = b_i[j*8 +: 8];
  end

  for (genvar i = 0; i < Rows; i++) begin : g_row
    for (genvar j = 0; j < Cols; j++) begin : g_col
      tsr_pe u_pe (
        .clk_i,
        .rst_ni,
        .clear_i,
        .a_i    (a_link[(i*(Cols+1)+j)*8 +: 8]),
        .valid_i(v_link[i*(Cols+1)+j]),
        .first_i(f_link[i*(Cols+1)+j]),
        .last_i (l_link[i*(Cols+1)+j]),
        .b_i    (b_link[(i*Cols+j)*8 +: 8]),
        .a_o    (a_link[(i*(Cols+1)+j+1)*8 +: 8]),
        .valid_o(v_link[i*(Cols+1)+j+1]),
        .first_o(f_link[i*(Cols+1)+j+1]),
        .last_o (l_link[i*(Cols+1)+j+1]),
        .b_o    (b_link[((i+1)*Cols+j)*8 +: 8]),
        .out_o  (out_o[(i*Cols+j)*32 +: 32])
      );
    end
  end

  // The links leaving the right and bottom edges go nowhere.
  logic unused_edges;
  always_comb begin
    unused_edges = 1'b0;
    for (int i = 0; i < Rows; i++) begin
      unused_edges ^= ^a_link[(i*(Cols+1)+Cols)*8 +: 8] ^ v_link[i*(Cols+1)+Cols] ^
                      f_link[i*(Cols+1)+Cols] ^ l_link[i*(Cols+1)+Cols];
    end
    unused_edges ^= ^b_link[Rows*Cols*8 +: Cols*8];
  end
endmodule
