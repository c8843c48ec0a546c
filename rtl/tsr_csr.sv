// AXI4-Lite control/status register slave. The register map comes from tsr_pkg (generated from
// rtl/spec/tessera.toml). Writes take the AW and W beats together; reads answer one cycle later.
module tsr_csr #(
  parameter int unsigned Rows = 16,
  parameter int unsigned Cols = 16,
  parameter int unsigned KMax = 4096,
  parameter int unsigned AxiDataWidth = 256,
  parameter int unsigned MaxReads = 16,
  parameter bit          Bf16 = 1'b0,
  localparam int unsigned AddrWidth = tsr_pkg::ADDR_BITS,
  localparam int unsigned NumCounters = tsr_pkg::NUM_COUNTERS
) (
  input  logic        clk_i,
  input  logic        rst_ni,
  // AXI4-Lite slave
  input  logic        s_awvalid_i,
  output logic        s_awready_o,
  input  logic [11:0] s_awaddr_i,
  input  logic        s_wvalid_i,
  output logic        s_wready_o,
  input  logic [31:0] s_wdata_i,
  input  logic [3:0]  s_wstrb_i,
  output logic        s_bvalid_o,
  input  logic        s_bready_i,
  output logic [1:0]  s_bresp_o,
  input  logic        s_arvalid_i,
  output logic        s_arready_o,
  input  logic [11:0] s_araddr_i,
  output logic        s_rvalid_o,
  input  logic        s_rready_i,
  output logic [31:0] s_rdata_o,
  output logic [1:0]  s_rresp_o,
  // to the engine
  output logic        enable_o,
  output logic        soft_reset_o,      // one-cycle pulse
  output logic [63:0] ring_base_o,
  output logic [31:0] ring_size_o,
  output logic        ring_size_bad_o,   // RING_SIZE is 0, not a power of two, or above the maximum
  output logic [31:0] ring_tail_o,
  // from the engine
  input  logic        clear_i,           // soft reset is taking effect: clear queue state
  input  logic [2:0]  status_i,          // {resetting, halted, busy}
  input  logic        irq_done_i,        // set IRQ_STATUS.DONE
  input  logic        irq_error_i,       // set IRQ_STATUS.ERROR
  input  logic [7:0]  err_code_i,
  input  logic [63:0] err_addr_i,
  input  logic [31:0] err_desc_i,
  input  logic [31:0] ring_head_i,
  input  logic [31:0] completed_i,
  input  logic [31:0] last_tag_i,
  input  logic [NumCounters*64-1:0] counters_i,
  output logic        irq_o
);
  logic        enable_q, enable_d;
  logic [31:0] scratch_q, scratch_d;
  logic [1:0]  irq_status_q, irq_status_d, irq_enable_q, irq_enable_d;
  logic [63:0] ring_base_q, ring_base_d;
  logic [31:0] ring_size_q, ring_size_d, ring_tail_q, ring_tail_d;
  // RING_SIZE's check, registered a cycle after it: the controller's ring check then starts at
  // flip-flops. AXI-Lite writes here are two cycles apart at the least (a write waits for the
  // previous one's response), so a doorbell written after RING_SIZE never sees the check behind.
  logic        size_bad_q;
  function automatic logic size_bad(logic [31:0] size);
    size_bad = size == '0 || (size & (size - 1'b1)) != '0 || size > tsr_pkg::RING_MAX_ENTRIES;
  endfunction
  logic [31:0] cnt_hi_q, cnt_hi_d;     // high word latched when a counter's low word is read
  logic        bvalid_q, bvalid_d, rvalid_q, rvalid_d, soft_reset_q, soft_reset_d;
  logic [31:0] rdata_q, rdata_d;
  logic        do_write, do_read;
  logic [31:0] wmask, rword;
  logic [63:0] counter_sel;

  assign do_write = s_awvalid_i && s_wvalid_i && !bvalid_q;
  assign do_read  = s_arvalid_i && !rvalid_q;
  assign s_awready_o = do_write;
  assign s_wready_o  = do_write;
  assign s_arready_o = do_read;
  assign s_bvalid_o  = bvalid_q;
  assign s_bresp_o   = 2'b00;
  assign s_rvalid_o  = rvalid_q;
  assign s_rdata_o   = rdata_q;
  assign s_rresp_o   = 2'b00;

  assign wmask = {{8{s_wstrb_i[3]}}, {8{s_wstrb_i[2]}}, {8{s_wstrb_i[1]}}, {8{s_wstrb_i[0]}}};

  // The counter pair addressed by a read (counters are 64-bit, 8 bytes apart from CNT_BUSY_LO).
  always_comb begin
    counter_sel = '0;
    for (int unsigned i = 0; i < NumCounters; i++) begin
      if (s_araddr_i[11:3] == 9'((32'(tsr_pkg::CSR_CNT_BUSY_LO) >> 3) + i)) counter_sel = counters_i[i*64 +: 64];
    end
  end

  always_comb begin
    rword = '0;
    unique case (s_araddr_i)
      tsr_pkg::CSR_ID:          rword = tsr_pkg::ENGINE_ID;
      tsr_pkg::CSR_VERSION:     rword = {16'(tsr_pkg::VERSION_MAJOR), 16'(tsr_pkg::VERSION_MINOR)};
      tsr_pkg::CSR_CFG_ARRAY:   rword = {10'd0, Bf16, 1'(tsr_int_pkg::fold_ok(Rows, Cols, AxiDataWidth)), 4'd0, 8'(Cols), 8'(Rows)};
      tsr_pkg::CSR_CFG_MEM:     rword = {8'(MaxReads), 8'(AxiDataWidth / 8), 16'(KMax)};
      tsr_pkg::CSR_CFG_ADDR:    rword = {8'd0, 16'(tsr_pkg::ALIGN_BYTES), 8'(AddrWidth)};
      tsr_pkg::CSR_SCRATCH:     rword = scratch_q;
      tsr_pkg::CSR_CTRL:        rword = {31'd0, enable_q};
      tsr_pkg::CSR_STATUS:      rword = {29'd0, status_i};
      tsr_pkg::CSR_IRQ_STATUS:  rword = {30'd0, irq_status_q};
      tsr_pkg::CSR_IRQ_ENABLE:  rword = {30'd0, irq_enable_q};
      tsr_pkg::CSR_ERR_CODE:    rword = {24'd0, err_code_i};
      tsr_pkg::CSR_ERR_ADDR_LO: rword = err_addr_i[31:0];
      tsr_pkg::CSR_ERR_ADDR_HI: rword = err_addr_i[63:32];
      tsr_pkg::CSR_ERR_DESC:    rword = err_desc_i;
      tsr_pkg::CSR_RING_BASE_LO: rword = ring_base_q[31:0];
      tsr_pkg::CSR_RING_BASE_HI: rword = ring_base_q[63:32];
      tsr_pkg::CSR_RING_SIZE:   rword = ring_size_q;
      tsr_pkg::CSR_RING_HEAD:   rword = ring_head_i;
      tsr_pkg::CSR_RING_TAIL:   rword = ring_tail_q;
      tsr_pkg::CSR_COMPLETED:   rword = completed_i;
      tsr_pkg::CSR_LAST_TAG:    rword = last_tag_i;
      default: begin
        if (s_araddr_i >= tsr_pkg::CSR_CNT_BUSY_LO &&
            s_araddr_i < 12'(32'(tsr_pkg::CSR_CNT_BUSY_LO) + NumCounters * 8)) begin
          rword = s_araddr_i[2] ? cnt_hi_q : counter_sel[31:0];
        end
      end
    endcase
  end

  always_comb begin
    enable_d       = enable_q;
    scratch_d      = scratch_q;
    irq_enable_d   = irq_enable_q;
    ring_base_d    = ring_base_q;
    ring_size_d    = ring_size_q;
    ring_tail_d    = ring_tail_q;
    cnt_hi_d       = cnt_hi_q;
    irq_status_d   = irq_status_q;
    soft_reset_d   = 1'b0;
    bvalid_d       = bvalid_q && !s_bready_i;
    rvalid_d       = rvalid_q && !s_rready_i;
    rdata_d        = rdata_q;

    if (do_write) begin
      bvalid_d = 1'b1;
      unique case (s_awaddr_i)
        tsr_pkg::CSR_SCRATCH:      scratch_d = (scratch_q & ~wmask) | (s_wdata_i & wmask);
        tsr_pkg::CSR_CTRL: begin
          if (s_wstrb_i[0]) begin
            enable_d     = s_wdata_i[tsr_pkg::CTRL_ENABLE_LSB];
            soft_reset_d = s_wdata_i[tsr_pkg::CTRL_SOFT_RESET_LSB];
          end
        end
        tsr_pkg::CSR_IRQ_STATUS:   irq_status_d = irq_status_d & ~(s_wdata_i[1:0] & wmask[1:0]);
        tsr_pkg::CSR_IRQ_ENABLE:   irq_enable_d = (irq_enable_q & ~wmask[1:0]) | (s_wdata_i[1:0] & wmask[1:0]);
        tsr_pkg::CSR_RING_BASE_LO: ring_base_d[31:0] = (ring_base_q[31:0] & ~wmask) | (s_wdata_i & wmask);
        tsr_pkg::CSR_RING_BASE_HI: ring_base_d[63:32] = (ring_base_q[63:32] & ~wmask) | (s_wdata_i & wmask);
        tsr_pkg::CSR_RING_SIZE:    ring_size_d = (ring_size_q & ~wmask) | (s_wdata_i & wmask);
        tsr_pkg::CSR_RING_TAIL:    ring_tail_d = (ring_tail_q & ~wmask) | (s_wdata_i & wmask);
        default: ;
      endcase
    end
    if (do_read) begin
      rvalid_d = 1'b1;
      rdata_d  = rword;
      if (s_araddr_i >= tsr_pkg::CSR_CNT_BUSY_LO &&
          s_araddr_i < 12'(32'(tsr_pkg::CSR_CNT_BUSY_LO) + NumCounters * 8) && !s_araddr_i[2]) begin
        cnt_hi_d = counter_sel[63:32];
      end
    end
    // A cause raised in the same cycle as a write-one-to-clear is kept.
    irq_status_d = irq_status_d | {irq_error_i, irq_done_i};
    if (clear_i) begin
      ring_tail_d  = '0;
      irq_status_d = '0;
      cnt_hi_d     = '0;
    end
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      enable_q     <= 1'b0;
      scratch_q    <= '0;
      irq_status_q <= '0;
      irq_enable_q <= '0;
      ring_base_q  <= '0;
      ring_size_q  <= '0;
      size_bad_q   <= 1'b1;
      ring_tail_q  <= '0;
      cnt_hi_q     <= '0;
      bvalid_q     <= 1'b0;
      rvalid_q     <= 1'b0;
      rdata_q      <= '0;
      soft_reset_q <= 1'b0;
    end else begin
      enable_q     <= enable_d;
      scratch_q    <= scratch_d;
      irq_status_q <= irq_status_d;
      irq_enable_q <= irq_enable_d;
      ring_base_q  <= ring_base_d;
      ring_size_q  <= ring_size_d;
      size_bad_q   <= size_bad(ring_size_q);
      ring_tail_q  <= ring_tail_d;
      cnt_hi_q     <= cnt_hi_d;
      bvalid_q     <= bvalid_d;
      rvalid_q     <= rvalid_d;
      rdata_q      <= rdata_d;
      soft_reset_q <= soft_reset_d;
    end
  end

  assign enable_o     = enable_q;
  assign soft_reset_o = soft_reset_q;
  assign ring_base_o  = ring_base_q;
  assign ring_size_o  = ring_size_q;
  assign ring_size_bad_o = size_bad_q;
  assign ring_tail_o  = ring_tail_q;
  assign irq_o        = |(irq_status_q & irq_enable_q);
endmodule
