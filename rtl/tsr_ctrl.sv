// Queue control: fetches descriptors from the ring, checks them, starts the GEMM units, completes
// descriptors in order, and owns errors, soft reset and the performance counters.
//
// On an error the engine stops issuing bus requests, lets the bursts in flight finish (AXI allows
// no abandoned transaction), and halts with the code, address and ring index in the CSRs. Soft
// reset drains the same way, then clears the queue, errors and counters.
module tsr_ctrl #(
  parameter int unsigned KMax = 4096,
  parameter int unsigned AxiDataWidth = 256,
  parameter int unsigned AddrWidth = 32,
  parameter int unsigned BeatsWidth = 16,
  localparam int unsigned KW = $clog2(KMax),
  localparam int unsigned NumCounters = 5
) (
  input  logic                   clk_i,
  input  logic                   rst_ni,
  // from the CSRs
  input  logic                   enable_i,
  input  logic                   soft_reset_i,
  input  logic [63:0]            ring_base_i,
  input  logic [31:0]            ring_size_i,
  input  logic [31:0]            ring_tail_i,
  // to the CSRs
  output logic                   clear_o,
  output logic [2:0]             status_o,
  output logic                   irq_done_o,
  output logic                   irq_error_o,
  output logic [7:0]             err_code_o,
  output logic [63:0]            err_addr_o,
  output logic [31:0]            err_desc_o,
  output logic [31:0]            ring_head_o,
  output logic [31:0]            completed_o,
  output logic [31:0]            last_tag_o,
  output logic [NumCounters*64-1:0] counters_o,
  // descriptor fetch
  output logic                   desc_req_valid_o,
  input  logic                   desc_req_ready_i,
  output logic [AddrWidth-1:0]   desc_req_addr_o,
  input  logic                   desc_beat_valid_i,
  input  logic [AxiDataWidth-1:0] desc_beat_data_i,
  input  logic [BeatsWidth-1:0]  desc_beat_idx_i,
  input  logic                   desc_beat_last_i,
  // the GEMM units
  output logic                   abort_o,
  output logic                   start_o,
  output logic [15:0]            m_o,
  output logic [15:0]            n_o,
  output logic [KW:0]            k_o,
  output logic                   acc_o,
  output logic                   bias_o,
  output logic                   int8_o,
  output logic [AddrWidth-1:0]   a_addr_o,
  output logic [AddrWidth-1:0]   b_addr_o,
  output logic [AddrWidth-1:0]   c_addr_o,
  output logic [AddrWidth-1:0]   cin_addr_o,
  output logic [AddrWidth-1:0]   bias_addr_o,
  output logic [AddrWidth-1:0]   mult_addr_o,
  output logic [AddrWidth-1:0]   shift_addr_o,
  output logic [AddrWidth-1:0]   lda_o,
  output logic [AddrWidth-1:0]   ldb_o,
  output logic [AddrWidth-1:0]   ldc_o,
  output logic [AddrWidth-1:0]   ldcin_o,
  output logic [7:0]             out_zp_o,
  output logic [7:0]             act_min_o,
  output logic [7:0]             act_max_o,
  input  logic                   gemm_done_i,      // every row of the GEMM left the epilogue
  input  logic                   store_idle_i,     // and was written and acknowledged
  input  logic                   store_quiet_i,
  input  logic                   rd_idle_i,
  // errors and events for the counters
  input  logic                   rd_err_i,
  input  logic [AddrWidth-1:0]   rd_err_addr_i,
  input  logic                   wr_err_i,
  input  logic [AddrWidth-1:0]   wr_err_addr_i,
  input  logic                   param_err_i,
  input  logic [AddrWidth-1:0]   param_err_addr_i,
  input  logic                   stall_i,
  input  logic                   rd_beat_i,
  input  logic [$clog2(AxiDataWidth/8):0] wr_bytes_i
);
  localparam int unsigned BeatBytes = AxiDataWidth / 8;
  localparam int unsigned DescBeats = tsr_pkg::DESC_BYTES / BeatBytes;
  localparam int unsigned DescShift = $clog2(tsr_pkg::DESC_BYTES);

  typedef enum logic [3:0] {
    CIdle, CFetch, CWaitDesc, CDecode, CCheck, CRun, CComplete, CAbort, CHalted, CReset
  } state_e;
  state_e state_q, state_d;

  logic [tsr_pkg::DESC_BITS-1:0] desc_q;
  logic [31:0] head_q, head_d, completed_q, completed_d, last_tag_q, last_tag_d;
  logic [7:0]  err_code_q, err_code_d;
  logic [63:0] err_addr_q, err_addr_d;
  logic [31:0] err_desc_q, err_desc_d;
  logic        reset_req_q, reset_req_d, clear_q, clear_d;
  logic [7:0]  chk_code_q, chk_code_d;
  logic [63:0] chk_addr_q, chk_addr_d;
  logic [31:0] mn_q;
  logic [47:0] macs_q;
  logic [63:0] cnt_q [NumCounters];

  // ---------------------------------------------------------------- descriptor fields
  logic [7:0]  f_op;
  logic [1:0]  f_mode;
  logic [31:0] f_m, f_n, f_k, f_lda, f_ldb, f_ldc, f_ldcin, f_tag;
  logic [63:0] f_a, f_b, f_c, f_cin, f_bias, f_mult, f_shift;
  logic        f_acc, f_bias_en, f_irq, f_int8;
  logic [7:0]  f_zp, f_min, f_max;
  assign f_op      = desc_q[tsr_pkg::D_OPCODE_LSB +: tsr_pkg::D_OPCODE_BITS];
  assign f_mode    = desc_q[tsr_pkg::D_OUT_MODE_LSB +: tsr_pkg::D_OUT_MODE_BITS];
  assign f_m       = desc_q[tsr_pkg::D_M_LSB +: tsr_pkg::D_M_BITS];
  assign f_n       = desc_q[tsr_pkg::D_N_LSB +: tsr_pkg::D_N_BITS];
  assign f_k       = desc_q[tsr_pkg::D_K_LSB +: tsr_pkg::D_K_BITS];
  assign f_a       = desc_q[tsr_pkg::D_A_ADDR_LSB +: tsr_pkg::D_A_ADDR_BITS];
  assign f_b       = desc_q[tsr_pkg::D_B_ADDR_LSB +: tsr_pkg::D_B_ADDR_BITS];
  assign f_c       = desc_q[tsr_pkg::D_C_ADDR_LSB +: tsr_pkg::D_C_ADDR_BITS];
  assign f_cin     = desc_q[tsr_pkg::D_CIN_ADDR_LSB +: tsr_pkg::D_CIN_ADDR_BITS];
  assign f_bias    = desc_q[tsr_pkg::D_BIAS_ADDR_LSB +: tsr_pkg::D_BIAS_ADDR_BITS];
  assign f_mult    = desc_q[tsr_pkg::D_MULT_ADDR_LSB +: tsr_pkg::D_MULT_ADDR_BITS];
  assign f_shift   = desc_q[tsr_pkg::D_SHIFT_ADDR_LSB +: tsr_pkg::D_SHIFT_ADDR_BITS];
  assign f_lda     = desc_q[tsr_pkg::D_LDA_LSB +: tsr_pkg::D_LDA_BITS];
  assign f_ldb     = desc_q[tsr_pkg::D_LDB_LSB +: tsr_pkg::D_LDB_BITS];
  assign f_ldc     = desc_q[tsr_pkg::D_LDC_LSB +: tsr_pkg::D_LDC_BITS];
  assign f_ldcin   = desc_q[tsr_pkg::D_LDCIN_LSB +: tsr_pkg::D_LDCIN_BITS];
  assign f_zp      = desc_q[tsr_pkg::D_OUT_ZP_LSB +: tsr_pkg::D_OUT_ZP_BITS];
  assign f_min     = desc_q[tsr_pkg::D_ACT_MIN_LSB +: tsr_pkg::D_ACT_MIN_BITS];
  assign f_max     = desc_q[tsr_pkg::D_ACT_MAX_LSB +: tsr_pkg::D_ACT_MAX_BITS];
  assign f_tag     = desc_q[tsr_pkg::D_TAG_LSB +: tsr_pkg::D_TAG_BITS];
  assign f_bias_en = desc_q[tsr_pkg::FLAG_BIAS];
  assign f_acc     = desc_q[tsr_pkg::FLAG_ACCUMULATE];
  assign f_irq     = desc_q[tsr_pkg::FLAG_IRQ];
  assign f_int8    = f_mode == tsr_pkg::OUT_INT8;

  logic [63:0] desc_addr;
  assign desc_addr = ring_base_i + (64'(head_q) << DescShift);

  // ---------------------------------------------------------------- descriptor checks
  // Order and meaning as docs/registers.md and the golden model's validate().
  localparam int unsigned NumChecked = 11;
  logic [63:0] chk_val  [NumChecked];
  logic        chk_used [NumChecked];
  logic        chk_is_addr [NumChecked];
  always_comb begin
    chk_val[0]  = f_a;            chk_used[0]  = 1'b1;      chk_is_addr[0]  = 1'b1;
    chk_val[1]  = 64'(f_lda);     chk_used[1]  = 1'b1;      chk_is_addr[1]  = 1'b0;
    chk_val[2]  = f_b;            chk_used[2]  = 1'b1;      chk_is_addr[2]  = 1'b1;
    chk_val[3]  = 64'(f_ldb);     chk_used[3]  = 1'b1;      chk_is_addr[3]  = 1'b0;
    chk_val[4]  = f_c;            chk_used[4]  = 1'b1;      chk_is_addr[4]  = 1'b1;
    chk_val[5]  = 64'(f_ldc);     chk_used[5]  = 1'b1;      chk_is_addr[5]  = 1'b0;
    chk_val[6]  = f_cin;          chk_used[6]  = f_acc;     chk_is_addr[6]  = 1'b1;
    chk_val[7]  = 64'(f_ldcin);   chk_used[7]  = f_acc;     chk_is_addr[7]  = 1'b0;
    chk_val[8]  = f_bias;         chk_used[8]  = f_bias_en; chk_is_addr[8]  = 1'b1;
    chk_val[9]  = f_mult;         chk_used[9]  = f_int8;    chk_is_addr[9]  = 1'b1;
    chk_val[10] = f_shift;        chk_used[10] = f_int8;    chk_is_addr[10] = 1'b1;
  end

  always_comb begin
    chk_code_d = tsr_pkg::ERR_NONE;
    chk_addr_d = '0;
    if (f_op != tsr_pkg::OP_GEMM && f_op != tsr_pkg::OP_NOP) begin
      chk_code_d = tsr_pkg::ERR_OPCODE;
      chk_addr_d = desc_addr;
    end else if (f_op == tsr_pkg::OP_GEMM) begin
      if (f_mode > tsr_pkg::OUT_INT8) begin
        chk_code_d = tsr_pkg::ERR_MODE;
        chk_addr_d = desc_addr;
      end else if (f_m == '0 || f_n == '0 || f_k == '0 || f_m > tsr_pkg::DIM_MAX ||
                   f_n > tsr_pkg::DIM_MAX || f_k > KMax) begin
        chk_code_d = tsr_pkg::ERR_DIM;
        chk_addr_d = desc_addr;
      end else if (f_int8 && $signed(f_min) > $signed(f_max)) begin
        chk_code_d = tsr_pkg::ERR_PARAM;
        chk_addr_d = desc_addr;
      end else begin
        for (int i = NumChecked - 1; i >= 0; i--) begin
          if (chk_used[i] && chk_val[i][$clog2(tsr_pkg::ALIGN_BYTES)-1:0] != '0) begin
            chk_code_d = tsr_pkg::ERR_ALIGN;
            chk_addr_d = chk_val[i];
          end
        end
        if (chk_code_d == tsr_pkg::ERR_NONE) begin
          if (f_lda < f_k) begin
            chk_code_d = tsr_pkg::ERR_STRIDE;
            chk_addr_d = 64'(f_lda);
          end else if (f_ldb < f_n) begin
            chk_code_d = tsr_pkg::ERR_STRIDE;
            chk_addr_d = 64'(f_ldb);
          end else if (34'(f_ldc) < (f_int8 ? 34'(f_n) : {f_n, 2'b00})) begin
            chk_code_d = tsr_pkg::ERR_STRIDE;
            chk_addr_d = 64'(f_ldc);
          end else if (f_acc && 34'(f_ldcin) < {f_n, 2'b00}) begin
            chk_code_d = tsr_pkg::ERR_STRIDE;
            chk_addr_d = 64'(f_ldcin);
          end
        end
        if (chk_code_d == tsr_pkg::ERR_NONE) begin
          for (int i = NumChecked - 1; i >= 0; i--) begin
            if (chk_used[i] && chk_is_addr[i] && chk_val[i][63:AddrWidth] != '0) begin
              chk_code_d = tsr_pkg::ERR_ADDR;
              chk_addr_d = chk_val[i];
            end
          end
        end
      end
    end
  end

  // ---------------------------------------------------------------- ring checks
  logic        ring_bad;
  logic [63:0] ring_bad_val;
  always_comb begin
    ring_bad     = 1'b1;
    ring_bad_val = 64'(ring_size_i);
    if (ring_size_i == '0 || (ring_size_i & (ring_size_i - 1'b1)) != '0 ||
        ring_size_i > tsr_pkg::RING_MAX_ENTRIES) begin
      ring_bad_val = 64'(ring_size_i);
    end else if (ring_base_i[DescShift-1:0] != '0 || ring_base_i[63:AddrWidth] != '0) begin
      ring_bad_val = ring_base_i;
    end else if (ring_tail_i >= ring_size_i) begin
      ring_bad_val = 64'(ring_tail_i);
    end else begin
      ring_bad = 1'b0;
    end
  end

  // ---------------------------------------------------------------- state machine
  logic in_flight, error_now;
  logic [7:0]  error_code;
  logic [63:0] error_addr;
  assign in_flight = state_q == CFetch || state_q == CWaitDesc || state_q == CDecode ||
                     state_q == CCheck || state_q == CRun;

  always_comb begin
    error_now  = 1'b0;
    error_code = tsr_pkg::ERR_NONE;
    error_addr = '0;
    if (state_q == CCheck && chk_code_q != tsr_pkg::ERR_NONE) begin
      error_now  = 1'b1;
      error_code = chk_code_q;
      error_addr = chk_addr_q;
    end else if (in_flight && rd_err_i) begin
      error_now  = 1'b1;
      error_code = tsr_pkg::ERR_AXI_RD;
      error_addr = 64'(rd_err_addr_i);
    end else if (in_flight && param_err_i) begin
      error_now  = 1'b1;
      error_code = tsr_pkg::ERR_PARAM;
      error_addr = 64'(param_err_addr_i);
    end else if (in_flight && wr_err_i) begin
      error_now  = 1'b1;
      error_code = tsr_pkg::ERR_AXI_WR;
      error_addr = 64'(wr_err_addr_i);
    end else if (state_q == CIdle && enable_i && !reset_req_q && !clear_q && head_q != ring_tail_i &&
                 ring_bad) begin
      error_now  = 1'b1;
      error_code = tsr_pkg::ERR_RING;
      error_addr = ring_bad_val;
    end
  end

  logic drained;
  assign drained = rd_idle_i && store_quiet_i;

  always_comb begin
    state_d     = state_q;
    head_d      = head_q;
    completed_d = completed_q;
    last_tag_d  = last_tag_q;
    err_code_d  = err_code_q;
    err_addr_d  = err_addr_q;
    err_desc_d  = err_desc_q;
    reset_req_d = reset_req_q || soft_reset_i;
    clear_d     = 1'b0;
    start_o     = 1'b0;
    irq_done_o  = 1'b0;
    irq_error_o = 1'b0;

    unique case (state_q)
      // Not while the soft reset's clear lands: head and tail are being zeroed.
      CIdle:     if (enable_i && !clear_q && head_q != ring_tail_i) state_d = CFetch;
      CFetch:    if (desc_req_ready_i) state_d = CWaitDesc;
      CWaitDesc: if (desc_beat_valid_i && desc_beat_last_i) state_d = CDecode;
      CDecode:   state_d = CCheck;
      CCheck: begin
        if (f_op == tsr_pkg::OP_NOP) begin
          state_d = CComplete;
        end else begin
          start_o = 1'b1;
          state_d = CRun;
        end
      end
      CRun:      if (gemm_done_i && store_idle_i) state_d = CComplete;
      CComplete: begin
        head_d      = (head_q + 1'b1) & (ring_size_i - 1'b1);
        completed_d = completed_q + 1'b1;
        last_tag_d  = f_tag;
        irq_done_o  = f_irq;
        state_d     = CIdle;
      end
      CAbort:    if (drained) state_d = CHalted;
      CHalted:   ;
      CReset: begin
        if (drained) begin
          clear_d = 1'b1;
          state_d = CIdle;
        end
      end
      default:   state_d = CIdle;
    endcase

    if (error_now) begin
      err_code_d  = error_code;
      err_addr_d  = error_addr;
      err_desc_d  = head_q;
      irq_error_o = 1'b1;
      start_o     = 1'b0;
      state_d     = CAbort;
    end
    if (reset_req_q && state_q != CReset) state_d = CReset;
    if (state_q == CReset) reset_req_d = soft_reset_i;
    if (clear_q) begin
      head_d      = '0;
      completed_d = '0;
      last_tag_d  = '0;
      err_code_d  = tsr_pkg::ERR_NONE;
      err_addr_d  = '0;
      err_desc_d  = '0;
    end
  end

  assign abort_o          = state_q == CAbort || state_q == CReset || state_q == CHalted;
  assign desc_req_valid_o = state_q == CFetch;
  assign desc_req_addr_o  = AddrWidth'(desc_addr);
  assign clear_o          = clear_q;
  // RESETTING shows from the cycle after the CTRL write, so a read that follows it sees the reset.
  assign status_o         = {soft_reset_i || reset_req_q || state_q == CReset || clear_q,
                             state_q == CAbort || state_q == CHalted,
                             state_q != CIdle && state_q != CHalted};

  // ---------------------------------------------------------------- counters
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      for (int i = 0; i < NumCounters; i++) cnt_q[i] <= '0;
    end else if (clear_q) begin
      for (int i = 0; i < NumCounters; i++) cnt_q[i] <= '0;
    end else begin
      cnt_q[0] <= cnt_q[0] + 64'(in_flight || state_q == CComplete);
      cnt_q[1] <= cnt_q[1] + 64'(state_q == CRun && stall_i);
      cnt_q[2] <= cnt_q[2] + ((state_q == CComplete && f_op == tsr_pkg::OP_GEMM) ? 64'(macs_q) : 64'd0);
      cnt_q[3] <= cnt_q[3] + (rd_beat_i ? 64'(BeatBytes) : 64'd0);
      cnt_q[4] <= cnt_q[4] + 64'(wr_bytes_i);
    end
  end
  for (genvar i = 0; i < NumCounters; i++) begin : g_cnt
    assign counters_o[i*64 +: 64] = cnt_q[i];
  end

  always_ff @(posedge clk_i) begin
    if (desc_beat_valid_i) begin
      for (int unsigned b = 0; b < DescBeats; b++) begin
        if (desc_beat_idx_i == BeatsWidth'(b)) desc_q[b*AxiDataWidth +: AxiDataWidth] <= desc_beat_data_i;
      end
    end
    chk_code_q <= chk_code_d;
    chk_addr_q <= chk_addr_d;
    mn_q       <= f_m[15:0] * f_n[15:0];
    macs_q     <= 48'(mn_q) * 48'(f_k[KW:0]);
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      state_q     <= CIdle;
      head_q      <= '0;
      completed_q <= '0;
      last_tag_q  <= '0;
      err_code_q  <= tsr_pkg::ERR_NONE;
      err_addr_q  <= '0;
      err_desc_q  <= '0;
      reset_req_q <= 1'b0;
      clear_q     <= 1'b0;
    end else begin
      state_q     <= state_d;
      head_q      <= head_d;
      completed_q <= completed_d;
      last_tag_q  <= last_tag_d;
      err_code_q  <= err_code_d;
      err_addr_q  <= err_addr_d;
      err_desc_q  <= err_desc_d;
      reset_req_q <= reset_req_d;
      clear_q     <= clear_d;
    end
  end

  assign err_code_o  = err_code_q;
  assign err_addr_o  = err_addr_q;
  assign err_desc_o  = err_desc_q;
  assign ring_head_o = head_q;
  assign completed_o = completed_q;
  assign last_tag_o  = last_tag_q;

  assign m_o          = f_m[15:0];
  assign n_o          = f_n[15:0];
  assign k_o          = f_k[KW:0];
  assign acc_o        = f_acc;
  assign bias_o       = f_bias_en;
  assign int8_o       = f_int8;
  assign a_addr_o     = AddrWidth'(f_a);
  assign b_addr_o     = AddrWidth'(f_b);
  assign c_addr_o     = AddrWidth'(f_c);
  assign cin_addr_o   = AddrWidth'(f_cin);
  assign bias_addr_o  = AddrWidth'(f_bias);
  assign mult_addr_o  = AddrWidth'(f_mult);
  assign shift_addr_o = AddrWidth'(f_shift);
  assign lda_o        = AddrWidth'(f_lda);
  assign ldb_o        = AddrWidth'(f_ldb);
  assign ldc_o        = AddrWidth'(f_ldc);
  assign ldcin_o      = AddrWidth'(f_ldcin);
  assign out_zp_o     = f_zp;
  assign act_min_o    = f_min;
  assign act_max_o    = f_max;
endmodule
