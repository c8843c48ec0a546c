// Queue control: fetches descriptors from the ring, checks them, starts the GEMM units, completes
// descriptors in order, and owns errors, soft reset and the performance counters.
//
// On an error the engine stops issuing bus requests, lets the bursts in flight finish (AXI allows
// no abandoned transaction), and halts with the code, address and ring index in the CSRs. Soft
// reset drains the same way, then clears the queue, errors and counters.
module tsr_ctrl #(
  parameter int unsigned Rows = 16,
  parameter int unsigned Cols = 16,
  parameter int unsigned KMax = 4096,
  parameter int unsigned AxiDataWidth = 256,
  parameter bit          Bf16 = 1'b0,
  localparam int unsigned AddrWidth = tsr_pkg::ADDR_BITS,
  localparam int unsigned BeatsWidth = tsr_pkg::BEATS_BITS,
  localparam int unsigned KW = $clog2(KMax)
) (
  input  logic                   clk_i,
  input  logic                   rst_ni,
  // from the CSRs
  input  logic                   enable_i,
  input  logic                   soft_reset_i,
  input  logic [63:0]            ring_base_i,
  input  logic [31:0]            ring_size_i,
  input  logic                   ring_size_bad_i,  // 0, not a power of two, or too large
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
  output logic [tsr_pkg::NUM_COUNTERS*64-1:0] counters_o,
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
  output tsr_pkg::gemm_cfg_t     cfg_o,
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
  input  logic [$clog2(AxiDataWidth/8):0] wr_bytes_i,
  input  logic                   step_i,
  input  logic                   tile_i,
  input  logic [15:0]            spad_rd_bytes_i
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
  logic        chk_fail;
  logic [7:0]  chk_code;
  logic [63:0] chk_addr;
  logic [31:0] mn_q;
  logic [47:0] macs_q;
  logic [30:0] mnk_lo_q;
  logic [28:0] mnk_hi_q;
  // public: the simulator may start the counters near a carry (the rtl option counter_start)
  logic [63:0] cnt_q [tsr_pkg::NUM_COUNTERS] /*verilator public_flat_rw*/;

  // ---------------------------------------------------------------- the descriptor
  tsr_pkg::desc_t desc;
  assign desc = desc_q;

  tsr_gemm_cfg u_gemm_cfg (
    .desc_i(desc),
    .cfg_o
  );

  // Where the head descriptor sits, registered: a new head (CComplete) or ring base (a CSR write,
  // which comes before the tail's doorbell) is in it by the time CIdle moves on to CFetch.
  logic [63:0] desc_addr;
  always_ff @(posedge clk_i) desc_addr <= ring_base_i + (64'(head_q) << DescShift);

  // ---------------------------------------------------------------- descriptor checks
  tsr_desc_check #(.Rows(Rows), .Cols(Cols), .KMax(KMax), .AxiDataWidth(AxiDataWidth), .Bf16(Bf16)) u_check (
    .clk_i,
    .desc_i     (desc),
    .desc_addr_i(desc_addr),
    .fail_o     (chk_fail),   // in CCheck: the checks of the descriptor decoded in CDecode
    .code_o     (chk_code),
    .addr_o     (chk_addr)
  );

  // ---------------------------------------------------------------- ring checks
  // Registered, with whether work is pending (head != tail): CIdle acts on the ring as it was the
  // cycle before, a consistent view, so that a doorbell is seen a cycle later, never without the
  // checks of its tail. The size's power-of-two test and the value's choice behind the error in
  // the same cycle were one of the paths that held the clock down (issue #42).
  logic        ring_bad, ring_bad_q, pending_q;
  logic [63:0] ring_bad_val, ring_bad_val_q;
  logic [31:0] head_next_q;  // the head after this one, (head + 1) & (RING_SIZE - 1), ready for CComplete
  always_comb begin
    ring_bad     = 1'b1;
    ring_bad_val = 64'(ring_size_i);
    if (ring_size_bad_i) begin
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
    if (state_q == CCheck && chk_fail) begin
      error_now  = 1'b1;
      error_code = chk_code;
      error_addr = chk_addr;
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
    end else if (state_q == CIdle && enable_i && !soft_reset_i && !reset_req_q && !clear_q &&
                 pending_q && ring_bad_q) begin
      // Not while a soft reset is on its way, whose clear empties the queue: SOFT_RESET written
      // with ENABLE arrives in the same cycle as ENABLE, and reset_req_q a cycle later.
      error_now  = 1'b1;
      error_code = tsr_pkg::ERR_RING;
      error_addr = ring_bad_val_q;
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
      CIdle:     if (enable_i && !clear_q && pending_q) state_d = CFetch;
      CFetch:    if (desc_req_ready_i) state_d = CWaitDesc;
      CWaitDesc: if (desc_beat_valid_i && desc_beat_last_i) state_d = CDecode;
      CDecode:   state_d = CCheck;
      CCheck: begin
        if (desc.opcode == tsr_pkg::OP_NOP) begin
          state_d = CComplete;
        end else begin
          start_o = 1'b1;
          state_d = CRun;
        end
      end
      CRun:      if (gemm_done_i && store_idle_i) state_d = CComplete;
      CComplete: begin
        head_d      = head_next_q;
        completed_d = completed_q + 1'b1;
        last_tag_d  = desc.tag;
        irq_done_o  = desc.irq;
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
  // The increments are registered, so that each 64-bit adder starts at flip-flops and not at the
  // sequencer's or the buses' logic (those paths were the engine's longest, issue #42): a counter
  // shows an action the cycle after it. MACS adds macs_q, a register already.
  logic inc_busy_q, inc_stall_q, inc_rd_q, inc_step_q, inc_tile_q, inc_desc_q;
  logic [$clog2(AxiDataWidth/8):0] inc_wr_q;
  logic [15:0] inc_spad_q;
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      {inc_busy_q, inc_stall_q, inc_rd_q, inc_step_q, inc_tile_q, inc_desc_q, inc_wr_q, inc_spad_q} <= '0;
    end else if (clear_q) begin
      {inc_busy_q, inc_stall_q, inc_rd_q, inc_step_q, inc_tile_q, inc_desc_q, inc_wr_q, inc_spad_q} <= '0;
    end else begin
      inc_busy_q  <= in_flight || state_q == CComplete;
      inc_stall_q <= state_q == CRun && stall_i;
      inc_rd_q    <= rd_beat_i;
      inc_wr_q    <= wr_bytes_i;
      inc_step_q  <= step_i;
      inc_tile_q  <= tile_i;
      inc_desc_q  <= state_q == CWaitDesc && desc_beat_valid_i && desc_beat_last_i;
      inc_spad_q  <= spad_rd_bytes_i;
    end
  end
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      for (int i = 0; i < tsr_pkg::NUM_COUNTERS; i++) cnt_q[i] <= '0;
    end else if (clear_q) begin
      for (int i = 0; i < tsr_pkg::NUM_COUNTERS; i++) cnt_q[i] <= '0;
    end else begin
      cnt_q[tsr_pkg::CNT_BUSY]     <= cnt_q[tsr_pkg::CNT_BUSY] + 64'(inc_busy_q);
      cnt_q[tsr_pkg::CNT_STALL]    <= cnt_q[tsr_pkg::CNT_STALL] + 64'(inc_stall_q);
      if (state_q == CComplete && desc.opcode == tsr_pkg::OP_GEMM) cnt_q[tsr_pkg::CNT_MACS] <= cnt_q[tsr_pkg::CNT_MACS] + 64'(macs_q);
      cnt_q[tsr_pkg::CNT_RD_BYTES] <= cnt_q[tsr_pkg::CNT_RD_BYTES] + (inc_rd_q ? 64'(BeatBytes) : 64'd0);
      cnt_q[tsr_pkg::CNT_WR_BYTES] <= cnt_q[tsr_pkg::CNT_WR_BYTES] + 64'(inc_wr_q);
      cnt_q[tsr_pkg::CNT_STEPS]    <= cnt_q[tsr_pkg::CNT_STEPS] + 64'(inc_step_q);
      cnt_q[tsr_pkg::CNT_TILES]    <= cnt_q[tsr_pkg::CNT_TILES] + 64'(inc_tile_q);
      cnt_q[tsr_pkg::CNT_DESCS]    <= cnt_q[tsr_pkg::CNT_DESCS] + 64'(inc_desc_q);
      cnt_q[tsr_pkg::CNT_SPAD_RD_BYTES] <= cnt_q[tsr_pkg::CNT_SPAD_RD_BYTES] + 64'(inc_spad_q);
    end
  end
  for (genvar i = 0; i < tsr_pkg::NUM_COUNTERS; i++) begin : g_cnt
    assign counters_o[i*64 +: 64] = cnt_q[i];
  end

  always_ff @(posedge clk_i) begin
    if (desc_beat_valid_i) begin
      for (int unsigned b = 0; b < DescBeats; b++) begin
        // Reserved bits are dropped: nothing reads them, and kept they would cost flip-flops.
        if (desc_beat_idx_i == BeatsWidth'(b)) begin
          desc_q[b*AxiDataWidth +: AxiDataWidth] <=
              desc_beat_data_i & tsr_pkg::DESC_FIELD_BITS[b*AxiDataWidth +: AxiDataWidth];
        end
      end
    end
    // M x N x K in registered steps, each product within one DSP48 (M x N's halves times K, then
    // their sum): it is added at completion, many cycles after the descriptor's decode
    mn_q       <= desc.m[15:0] * desc.n[15:0];
    mnk_lo_q   <= 31'(mn_q[16:0]) * 31'(desc.k[KW:0]);
    mnk_hi_q   <= 29'(mn_q[31:17]) * 29'(desc.k[KW:0]);
    macs_q     <= 48'(mnk_lo_q) + (48'(mnk_hi_q) << 17);
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
      pending_q   <= 1'b0;
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
      pending_q   <= !clear_q && head_d != ring_tail_i;  // the clear zeroes the tail as well
    end
  end
  always_ff @(posedge clk_i) begin
    ring_bad_q     <= ring_bad;
    ring_bad_val_q <= ring_bad_val;
    head_next_q    <= (head_d + 1'b1) & (ring_size_i - 1'b1);
  end

  assign err_code_o  = err_code_q;
  assign err_addr_o  = err_addr_q;
  assign err_desc_o  = err_desc_q;
  assign ring_head_o = head_q;
  assign completed_o = completed_q;
  assign last_tag_o  = last_tag_q;

endmodule
