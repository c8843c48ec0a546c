// B loader: per column block nb, the requantization tables (INT8), the bias (BIAS), then K rows of
// B (Cols bytes each) into B/parameter slot nb % 2, once that slot's B panel and tables are free.
// Requests carry a byte address; tsr_rd_arb aligns it to a beat and packs the read tag.
// With FOLD (no tables) a block is 2 x Cols columns: each B row is one beat that feeds both bands.
module tsr_loader_b #(
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
  input  logic                  bf16_i,      // a B row of the block is 2 x Cols bytes
  // slots: B panel and tables claimed and not yet released, per slot
  input  logic [1:0]            b_busy_i,
  input  logic [1:0]            p_busy_i,
  output logic [1:0]            claim_o,     // claims a slot's B panel and its tables
  // read requests
  output logic                  req_valid_o,
  input  logic                  grant_i,
  output logic [AddrWidth-1:0]  req_addr_o,
  output logic [BeatsWidth-1:0] req_beats_o,
  output logic [2:0]            req_dest_o,  // tsr_int_pkg::DEST_*
  output logic                  req_slot_o,
  output logic [KW-1:0]         req_idx_o,   // k of a B row; valid columns of a shift table
  output logic                  req_last_o   // the slot is complete with this request
);
  localparam int unsigned BeatBytes = AxiDataWidth / 8;
  localparam int unsigned Seg4Beats = (Cols * 4 <= BeatBytes) ? 1 : (Cols * 4) / BeatBytes;

  typedef enum logic [2:0] {LbIdle, LbWait, LbMult, LbShift, LbBias, LbRows} state_e;
  state_e state_q, state_d;
  logic [15:0] nb_q, nb_d, cols_left_q, cols_left_d;
  logic [KW:0] k_q, k_d;
  logic [AddrWidth-1:0] col_q, col_d, row_q, row_d;    // B column block / B row
  logic [AddrWidth-1:0] mult_q, mult_d, shift_q, shift_d, bias_q, bias_d;
  // The address and beats of the request the state makes, registered as the state moves: chosen
  // by the state in front of the read master, they were one of the paths that held the clock down
  // (issue #42).
  logic [AddrWidth-1:0]  addr_q, addr_d;
  logic [BeatsWidth-1:0] beats_q, beats_d;
  logic [KW:0] k;
  logic        int8, slot;
  logic [15:0] blk_cols;   // columns per block: Cols, or 2 x Cols with FOLD

  assign k    = cfg_i.k[KW:0];
  assign int8 = cfg_i.out_mode == tsr_pkg::OUT_INT8;
  assign slot = nb_q[0];
  assign blk_cols = cfg_i.fold ? 16'(2 * Cols) : 16'(Cols);

  // The address and beats of the request the state makes are registered as the state moves (addr_q,
  // beats_q): they are meaningful only with req_valid_o.
  assign req_addr_o  = addr_q;
  assign req_beats_o = beats_q;
  always_comb begin
    req_valid_o = 1'b0;
    req_dest_o  = '0;
    req_slot_o  = 1'b0;
    req_idx_o   = '0;
    req_last_o  = 1'b0;
    unique case (state_q)
      LbMult: begin
        req_valid_o = 1'b1;
        req_dest_o  = tsr_int_pkg::DEST_MULT;
        req_slot_o  = slot;
      end
      LbShift: begin
        req_valid_o = 1'b1;
        req_dest_o  = tsr_int_pkg::DEST_SHIFT;
        req_slot_o  = slot;
        req_idx_o   = (cols_left_q < 16'(Cols)) ? KW'(cols_left_q) : KW'(Cols);
      end
      LbBias: begin
        req_valid_o = 1'b1;
        req_dest_o  = tsr_int_pkg::DEST_BIAS;
        req_slot_o  = slot;
      end
      LbRows: begin
        req_valid_o = 1'b1;
        req_dest_o  = tsr_int_pkg::DEST_B;
        req_slot_o  = slot;
        req_idx_o   = k_q[KW-1:0];
        req_last_o  = k_q == k - 1'b1;
      end
      default: ;
    endcase
  end

  always_comb begin
    state_d     = state_q;
    nb_d        = nb_q;
    cols_left_d = cols_left_q;
    k_d         = k_q;
    col_d       = col_q;
    row_d       = row_q;
    mult_d      = mult_q;
    shift_d     = shift_q;
    bias_d      = bias_q;
    claim_o     = 2'b00;
    unique case (state_q)
      LbIdle: begin
        // The GEMM's terms are taken in every idle cycle (see tsr_loader_a)
        nb_d        = '0;
        cols_left_d = cfg_i.n;
        col_d       = cfg_i.b_addr;
        mult_d      = cfg_i.mult_addr;
        shift_d     = cfg_i.shift_addr;
        bias_d      = cfg_i.bias_addr;
        if (start_i) state_d = LbWait;
      end
      LbWait: begin
        if (cols_left_q == '0) begin
          state_d = LbIdle;
        end else if (((b_busy_i | p_busy_i) & tsr_int_pkg::onehot2(slot)) == '0) begin
          claim_o = tsr_int_pkg::onehot2(slot);
          k_d     = '0;
          row_d   = col_q;
          state_d = int8 ? LbMult : (cfg_i.bias ? LbBias : LbRows);
        end
      end
      LbMult:  if (grant_i) state_d = LbShift;
      LbShift: if (grant_i) state_d = cfg_i.bias ? LbBias : LbRows;
      LbBias:  if (grant_i) state_d = LbRows;
      LbRows: begin
        if (grant_i) begin
          k_d   = k_q + 1'b1;
          row_d = row_q + cfg_i.ldb;
          if (k_q == k - 1'b1) begin
            state_d     = LbWait;
            nb_d        = nb_q + 1'b1;
            cols_left_d = (cols_left_q > blk_cols) ? cols_left_q - blk_cols : '0;
            col_d       = col_q + (AddrWidth'(blk_cols) << bf16_i);
            mult_d      = mult_q + AddrWidth'(Cols * 4);
            shift_d     = shift_q + AddrWidth'(Cols);
            bias_d      = bias_q + AddrWidth'(Cols * 4);
          end
        end
      end
      default: state_d = LbIdle;
    endcase
    if (clear_i || abort_i) state_d = LbIdle;
    // the next request's: after a grant, the next state's; after a claim, the first's
    addr_d  = addr_q;
    beats_d = beats_q;
    if (state_q == LbWait) begin
      addr_d  = int8 ? mult_q : cfg_i.bias ? bias_q : col_q;
      beats_d = int8 || cfg_i.bias ? BeatsWidth'(Seg4Beats) : BeatsWidth'(1);
    end
    if (grant_i) begin
      unique case (state_q)
        LbMult: begin
          addr_d  = shift_q;
          beats_d = BeatsWidth'(1);
        end
        LbShift: begin
          addr_d  = cfg_i.bias ? bias_q : row_q;
          beats_d = cfg_i.bias ? BeatsWidth'(Seg4Beats) : BeatsWidth'(1);
        end
        LbBias: begin
          addr_d  = row_q;
          beats_d = BeatsWidth'(1);
        end
        default: addr_d = row_q + cfg_i.ldb;
      endcase
    end
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) state_q <= LbIdle;
    else         state_q <= state_d;
  end

  // Datapath registers: no reset needed, the state machine says when they are meaningful.
  always_ff @(posedge clk_i) begin
    nb_q        <= nb_d;
    cols_left_q <= cols_left_d;
    k_q         <= k_d;
    col_q       <= col_d;
    row_q       <= row_d;
    mult_q      <= mult_d;
    shift_q     <= shift_d;
    bias_q      <= bias_d;
    addr_q      <= addr_d;
    beats_q     <= beats_d;
  end
endmodule
