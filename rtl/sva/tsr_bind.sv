// Binds the simulation-only checkers into the engine (Verilator reads rtl/sim.f after rtl/files.f;
// synthesis reads rtl/files.f alone). A failing assertion stops the simulation with its name.
bind tsr_fifo tsr_fifo_sva u_sva (
  .clk_i, .rst_ni, .push_i, .pop_i, .full_o, .empty_o
);

bind tsr_seq tsr_seq_sva #(.Credits(Credits), .Rows(Rows), .Cols(Cols)) u_sva (
  .clk_i, .rst_ni, .credits_q, .start_tile, .tile_rows(($clog2(Credits)+1)'(cur_rows)),
  .a_reread(!a_wait && cfg_i.m > 16'(Rows)), .clear_i, .row_valid_o,
  .rows_left(rows_left_q), .cols_left(cols_left_q), .blk_cols, .fold, .pair, .epi_valid(e_valid_q),
  .shape({16'(cur_vr), 16'(cur_vc), 16'(cur_rows), 14'd0, cur_nblast, cur_final})
);

bind tsr_axi_rd tsr_axi_rd_sva #(.DataWidth(DataWidth)) u_sva (
  .clk_i, .rst_ni, .abort_i, .m_arvalid_o, .m_arready_i,
  .busy(busy_q), .addr(addr_q[PageW-1:0]), .left(left_q), .burst(burst), .last(last_q)
);

bind tsr_top tsr_top_sva #(.Rows(Rows), .Cols(Cols), .AxiDataWidth(AxiDataWidth), .MaxReads(MaxReads)) u_sva (
  .clk_i, .rst_ni,
  .m_axi_arvalid_o, .m_axi_arready_i, .m_axi_araddr_o, .m_axi_arlen_o, .m_axi_arburst_o,
  .m_axi_rvalid_i, .m_axi_rready_o, .m_axi_rlast_i,
  .m_axi_awvalid_o, .m_axi_awready_i, .m_axi_awaddr_o, .m_axi_awlen_o, .m_axi_awburst_o,
  .m_axi_wvalid_o, .m_axi_wready_i, .m_axi_wdata_o, .m_axi_wstrb_o, .m_axi_wlast_o,
  .m_axi_bvalid_i, .m_axi_bready_o,
  .ring_size, .ring_head, .err_code, .start, .cfg, .a_rel, .b_rel, .c_rel, .a_full, .b_full
);

bind tsr_ctrl tsr_ctrl_sva #(.KMax(KMax), .Bf16(Bf16)) u_sva (
  .clk_i, .check(state_q == CCheck), .desc, .chk_fail, .chk_code, .chk_addr, .error_now, .error_code,
  .fetch(state_q == CIdle && state_d == CFetch), .ring_size(ring_size_i), .ring_tail(ring_tail_i),
  .reset_draining(state_q == CReset && !drained),
  .clear_unsafe(clear_q && enable_i && head_q != ring_tail_i && ring_bad)
);
