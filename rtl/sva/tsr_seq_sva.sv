// Invariants of tsr_seq (simulation only, see tsr_bind.sv): the sequencer's credits count the free
// rows of the store unit's FIFO, so they stay within [0, Credits]; a tile starts only with credits
// for all its rows; a soft reset's clear leaves no row on its way into the array; a tile starts
// with the shape (rows, columns, last row block, last tile) its registers hold and the rows and
// columns left give, which the registers follow a cycle late; in a BF16 GEMM with C_in and a bias,
// no row enters the epilogue three cycles after another (the row's bias add would begin in the
// cycle the other's C_in add does, on the lane's one adder). Cover point: a resident A of several
// row blocks read again in a later column block, without being loaded again.
module tsr_seq_sva #(
  parameter int unsigned Credits = 32,
  parameter int unsigned Rows = 16,
  parameter int unsigned Cols = 16,
  localparam int unsigned CW = $clog2(Credits) + 1
) (
  input logic          clk_i,
  input logic          rst_ni,
  input logic [CW-1:0] credits_q,
  input logic          start_tile,
  input logic [CW-1:0] tile_rows,
  input logic          a_reread,  // the tile reads a resident A's row blocks left by earlier tiles
  input logic          clear_i,
  input logic [Rows-1:0] row_valid_o,
  input logic [15:0]   rows_left,
  input logic [15:0]   cols_left,
  input logic [15:0]   blk_cols,
  input logic          fold,
  input logic          pair,          // BF16 with C_in and a bias (tsr_seq)
  input logic          epi_valid,     // a row enters the epilogue
  input logic [63:0]   shape         // {vr, vc, rows, nblast, final} as registered, zero-extended
);
  logic [15:0] vr, vc, rows;
  logic [63:0] shape_now;
  assign vr   = rows_left < 16'(Rows) ? rows_left : 16'(Rows);
  assign vc   = cols_left < blk_cols ? cols_left : blk_cols;
  assign rows = fold && cols_left > 16'(Cols) ? vr << 1 : vr;
  assign shape_now = {vr, vc, rows, 14'd0, rows_left <= 16'(Rows),
                      rows_left <= 16'(Rows) && cols_left <= blk_cols};
  cov_a_resident_blocks: cover property (@(posedge clk_i) start_tile && a_reread);

  logic cleared_q;
  logic [2:0] epi_valid_q;  // rows that entered the epilogue 1, 2 and 3 cycles ago
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      cleared_q   <= 1'b0;
      epi_valid_q <= '0;
    end else begin
      cleared_q   <= clear_i;
      epi_valid_q <= {epi_valid_q[1:0], epi_valid};
    end
  end

  // Sampled at the clock edge outside reset (rst_ni is asynchronous, as in the design).
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (rst_ni) begin
      a_seq_clear_empties_rows: assert (!cleared_q || row_valid_o == '0)
        else begin
          $error("a row entered the array in the cycle after the clear");
          tsr_sva_pkg::tsr_assertion_failed($sformatf("%m"));
        end
      a_seq_credits_in_range: assert (credits_q <= CW'(Credits))
        else begin
          $error("store credits out of range (%0d of %0d): a credit was returned twice or taken below zero",
                    credits_q, Credits);
          tsr_sva_pkg::tsr_assertion_failed($sformatf("%m"));
        end
      a_seq_tile_shape_current: assert (!start_tile || shape == shape_now)
        else begin
          $error("a tile started with the shape %016x registered, %016x now", shape, shape_now);
          tsr_sva_pkg::tsr_assertion_failed($sformatf("%m"));
        end
      a_seq_pair_rows_apart: assert (!(pair && epi_valid && epi_valid_q[2]))
        else begin
          $error("a BF16 row with C_in and a bias entered the epilogue three cycles after another");
          tsr_sva_pkg::tsr_assertion_failed($sformatf("%m"));
        end
      a_seq_tile_has_credits: assert (!start_tile || tile_rows <= credits_q)
        else begin
          $error("a tile started with %0d credits for %0d rows", credits_q, tile_rows);
          tsr_sva_pkg::tsr_assertion_failed($sformatf("%m"));
        end
    end
  end
endmodule
