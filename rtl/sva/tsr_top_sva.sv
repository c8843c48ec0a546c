// Simulation-only checks of the engine top (bound into tsr_top by tsr_bind.sv, never synthesized):
// the AXI4 master's rules that the memory side relies on, and the functional cover points that
// rtl/testplan.toml maps onto testpoints (counted by Verilator's --coverage-user in coverage builds,
// see scripts/regress). An error code holds from the error to the next soft reset. The engine
// never back-pressures R or B (rready and bready are tied high), so on those channels the points
// are the memory's: a burst in flight with no beat (R) and writes waiting for their response (B).
module tsr_top_sva #(
  parameter int unsigned Rows = 16,
  parameter int unsigned Cols = 16,
  parameter int unsigned AxiDataWidth = 256,
  parameter int unsigned MaxReads = 16,
  localparam int unsigned AddrWidth = tsr_pkg::ADDR_BITS
) (
  input logic                      clk_i,
  input logic                      rst_ni,
  input logic                      m_axi_arvalid_o,
  input logic                      m_axi_arready_i,
  input logic [AddrWidth-1:0]      m_axi_araddr_o,
  input logic [7:0]                m_axi_arlen_o,
  input logic [1:0]                m_axi_arburst_o,
  input logic                      m_axi_rvalid_i,
  input logic                      m_axi_rready_o,
  input logic                      m_axi_rlast_i,
  input logic                      m_axi_awvalid_o,
  input logic                      m_axi_awready_i,
  input logic [AddrWidth-1:0]      m_axi_awaddr_o,
  input logic [7:0]                m_axi_awlen_o,
  input logic [1:0]                m_axi_awburst_o,
  input logic                      m_axi_wvalid_o,
  input logic                      m_axi_wready_i,
  input logic [AxiDataWidth-1:0]   m_axi_wdata_o,
  input logic [AxiDataWidth/8-1:0] m_axi_wstrb_o,
  input logic                      m_axi_wlast_o,
  input logic                      m_axi_bvalid_i,
  input logic                      m_axi_bready_o,
  // engine state for the cover points
  input logic [31:0]               ring_size,
  input logic [31:0]               ring_head,
  input logic [7:0]                err_code,
  input logic                      start,
  input tsr_pkg::gemm_cfg_t        cfg,
  input logic [3:0]                a_rel,
  input logic [1:0]                b_rel,
  input logic [1:0]                c_rel,
  input logic [3:0]                a_full,
  input logic [1:0]                b_full
);
  localparam int unsigned BeatBytes = AxiDataWidth / 8;
  localparam int unsigned PageW = $clog2(tsr_pkg::PAGE_BYTES);

  // ---------------------------------------------------------------- AXI4 master rules
  // A valid, once raised, stays up with its payload unchanged until the handshake.
  logic ar_wait_q, aw_wait_q, w_wait_q;
  logic [AddrWidth+8-1:0] ar_q, aw_q;
  logic [AxiDataWidth+AxiDataWidth/8:0] w_q;
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      ar_wait_q <= 1'b0;
      aw_wait_q <= 1'b0;
      w_wait_q  <= 1'b0;
    end else begin
      ar_wait_q <= m_axi_arvalid_o && !m_axi_arready_i;
      aw_wait_q <= m_axi_awvalid_o && !m_axi_awready_i;
      w_wait_q  <= m_axi_wvalid_o && !m_axi_wready_i;
    end
  end
  always_ff @(posedge clk_i) begin
    ar_q <= {m_axi_araddr_o, m_axi_arlen_o};
    aw_q <= {m_axi_awaddr_o, m_axi_awlen_o};
    w_q  <= {m_axi_wdata_o, m_axi_wstrb_o, m_axi_wlast_o};
  end

  // Bytes from a burst's start to the end of its 4 KB page, and the bytes it covers.
  function automatic logic [PageW:0] page_room(logic [PageW-1:0] offset);
    page_room = (PageW+1)'(tsr_pkg::PAGE_BYTES) - (PageW+1)'(offset);
  endfunction
  function automatic logic [PageW+8:0] burst_bytes(logic [7:0] len);
    burst_bytes = (PageW+9)'((32'(len) + 1) * BeatBytes);
  endfunction

  // Sampled at the clock edge outside reset (rst_ni is asynchronous, as in the design).
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (rst_ni) begin
      a_axi_ar_held: assert (!ar_wait_q || (m_axi_arvalid_o && {m_axi_araddr_o, m_axi_arlen_o} == ar_q))
        else begin
          $error("AR valid dropped or its address/length changed before ready");
          tsr_sva_pkg::tsr_assertion_failed($sformatf("%m"));
        end
      a_axi_aw_held: assert (!aw_wait_q || (m_axi_awvalid_o && {m_axi_awaddr_o, m_axi_awlen_o} == aw_q))
        else begin
          $error("AW valid dropped or its address/length changed before ready");
          tsr_sva_pkg::tsr_assertion_failed($sformatf("%m"));
        end
      a_axi_w_held: assert (!w_wait_q || (m_axi_wvalid_o && {m_axi_wdata_o, m_axi_wstrb_o, m_axi_wlast_o} == w_q))
        else begin
          $error("W valid dropped or its data changed before ready");
          tsr_sva_pkg::tsr_assertion_failed($sformatf("%m"));
        end
      if (m_axi_arvalid_o) begin
        a_axi_ar_incr: assert (m_axi_arburst_o == 2'b01) else begin
   $error("AR burst is not INCR");
   tsr_sva_pkg::tsr_assertion_failed($sformatf("%m"));
 end
        a_axi_ar_4k: assert (burst_bytes(m_axi_arlen_o) <= (PageW+9)'(page_room(m_axi_araddr_o[PageW-1:0])))
          else begin
            $error("read burst at %h, %0d beats, crosses a 4 KB boundary", m_axi_araddr_o, m_axi_arlen_o + 1);
            tsr_sva_pkg::tsr_assertion_failed($sformatf("%m"));
          end
      end
      if (m_axi_awvalid_o) begin
        a_axi_aw_incr: assert (m_axi_awburst_o == 2'b01) else begin
   $error("AW burst is not INCR");
   tsr_sva_pkg::tsr_assertion_failed($sformatf("%m"));
 end
        a_axi_aw_4k: assert (burst_bytes(m_axi_awlen_o) <= (PageW+9)'(page_room(m_axi_awaddr_o[PageW-1:0])))
          else begin
            $error("write burst at %h, %0d beats, crosses a 4 KB boundary", m_axi_awaddr_o, m_axi_awlen_o + 1);
            tsr_sva_pkg::tsr_assertion_failed($sformatf("%m"));
          end
      end
    end
  end

  // ---------------------------------------------------------------- cover points
  logic [31:0] cov_head_q;
  logic [15:0] cov_reads_q, cov_writes_q;
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      cov_head_q   <= '0;
      cov_reads_q  <= '0;
      cov_writes_q <= '0;
    end else begin
      cov_head_q   <= ring_head;
      cov_reads_q  <= cov_reads_q + 16'(m_axi_arvalid_o && m_axi_arready_i)
                      - 16'(m_axi_rvalid_i && m_axi_rready_o && m_axi_rlast_i);
      cov_writes_q <= cov_writes_q + 16'(m_axi_awvalid_o && m_axi_awready_i)
                      - 16'(m_axi_bvalid_i && m_axi_bready_o);
    end
  end
  // The engine's read tracker bounds the bursts it has in flight (whatever the memory would accept).
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (rst_ni) begin
      a_reads_within_tracker: assert (cov_reads_q <= 16'(MaxReads)) else begin
        $error("%0d read bursts in flight, more than the tracker's %0d", cov_reads_q, MaxReads);
        tsr_sva_pkg::tsr_assertion_failed($sformatf("%m"));
      end
    end
  end
  cov_ring_wrap: cover property (@(posedge clk_i) ring_size > 1 && cov_head_q == ring_size - 1 &&
                                 ring_head == 0);
  cov_err_opcode: cover property (@(posedge clk_i) err_code == tsr_pkg::ERR_OPCODE);
  cov_err_mode:   cover property (@(posedge clk_i) err_code == tsr_pkg::ERR_MODE);
  cov_err_dim:    cover property (@(posedge clk_i) err_code == tsr_pkg::ERR_DIM);
  cov_err_param:  cover property (@(posedge clk_i) err_code == tsr_pkg::ERR_PARAM);
  cov_err_align:  cover property (@(posedge clk_i) err_code == tsr_pkg::ERR_ALIGN);
  cov_err_stride: cover property (@(posedge clk_i) err_code == tsr_pkg::ERR_STRIDE);
  cov_err_addr:   cover property (@(posedge clk_i) err_code == tsr_pkg::ERR_ADDR);
  cov_err_ring:   cover property (@(posedge clk_i) err_code == tsr_pkg::ERR_RING);
  cov_err_axi_rd: cover property (@(posedge clk_i) err_code == tsr_pkg::ERR_AXI_RD);
  cov_err_axi_wr: cover property (@(posedge clk_i) err_code == tsr_pkg::ERR_AXI_WR);
  cov_err_precision: cover property (@(posedge clk_i) err_code == tsr_pkg::ERR_PRECISION);
  cov_out_int32:      cover property (@(posedge clk_i) start && cfg.out_mode == tsr_pkg::OUT_INT32);
  cov_out_int8:       cover property (@(posedge clk_i) start && cfg.out_mode == tsr_pkg::OUT_INT8);
  cov_out_accumulate: cover property (@(posedge clk_i) start && cfg.accumulate);
  cov_out_bias:       cover property (@(posedge clk_i) start && cfg.bias);
  cov_bf16_fp32:      cover property (@(posedge clk_i) start && cfg.precision == tsr_pkg::PREC_BF16 &&
                                      cfg.out_mode == tsr_pkg::OUT_FP32);
  cov_bf16_bf16:      cover property (@(posedge clk_i) start && cfg.precision == tsr_pkg::PREC_BF16 &&
                                      cfg.out_mode == tsr_pkg::OUT_BF16);
  cov_bf16_relu:      cover property (@(posedge clk_i) start && cfg.precision == tsr_pkg::PREC_BF16 && cfg.relu);
  cov_bf16_accumulate: cover property (@(posedge clk_i) start && cfg.precision == tsr_pkg::PREC_BF16 &&
                                       cfg.accumulate && cfg.bias);
  // One row block without C_in over several column blocks: A loaded once and kept in its slot.
  cov_a_resident:     cover property (@(posedge clk_i) start && !cfg.accumulate && cfg.m <= 16'(Rows) &&
                                      cfg.n > 16'(Cols));
  // FOLD with columns for both bands of rows, and with a last block for the upper band alone.
  cov_fold:           cover property (@(posedge clk_i) start && cfg.fold && cfg.n > 16'(Cols));
  cov_fold_upper_only: cover property (@(posedge clk_i) start && cfg.fold && cfg.n[$clog2(Cols):0] != '0 &&
                                       cfg.n[$clog2(Cols):0] <= ($clog2(Cols)+1)'(Cols));
  cov_axi_ar_stall: cover property (@(posedge clk_i) m_axi_arvalid_o && !m_axi_arready_i);
  cov_axi_aw_stall: cover property (@(posedge clk_i) m_axi_awvalid_o && !m_axi_awready_i);
  cov_axi_w_stall:  cover property (@(posedge clk_i) m_axi_wvalid_o && !m_axi_wready_i);
  // write data taken while its burst's address waits (a memory that takes W first, as AXI allows)
  cov_axi_w_before_aw: cover property (@(posedge clk_i) m_axi_wvalid_o && m_axi_wready_i &&
                                       m_axi_awvalid_o && !m_axi_awready_i);
  cov_axi_r_gap:    cover property (@(posedge clk_i) cov_reads_q != 0 && !m_axi_rvalid_i);
  // Every place of the read master's burst tracker in use: the depth that hides the memory's latency.
  cov_reads_all_in_flight: cover property (@(posedge clk_i) cov_reads_q == 16'(MaxReads));
  cov_axi_b_wait:   cover property (@(posedge clk_i) cov_writes_q != 0 && !m_axi_bvalid_i);
  cov_a_slot0_swap: cover property (@(posedge clk_i) a_rel[0]);
  cov_a_slot1_swap: cover property (@(posedge clk_i) a_rel[1]);
  cov_b_slot0_swap: cover property (@(posedge clk_i) b_rel[0]);
  cov_b_slot1_swap: cover property (@(posedge clk_i) b_rel[1]);
  cov_c_slot0_swap: cover property (@(posedge clk_i) c_rel[0]);
  cov_c_slot1_swap: cover property (@(posedge clk_i) c_rel[1]);
  cov_a_both_full:  cover property (@(posedge clk_i) a_full[1:0] == 2'b11);
  // BF16 tiles with short A rows ring through four A slots (tsr_int_pkg::a_quad): the last one
  // turned, and the loader two tiles ahead of the one the array is on.
  cov_a_slot2_swap: cover property (@(posedge clk_i) a_rel[2]);
  cov_a_slot3_swap: cover property (@(posedge clk_i) a_rel[3]);
  cov_a_ring_ahead: cover property (@(posedge clk_i) $countones(a_full) >= 3);
  cov_b_both_full:  cover property (@(posedge clk_i) b_full == 2'b11);
endmodule
