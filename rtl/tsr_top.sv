// Tessera matrix engine top: AXI4-Lite CSR slave, AXI4 master to device memory, one interrupt.
//
//   ring in memory --> ctrl (fetch, check, complete) --> loader --> axi_rd --> scratch
//                                                                     |          |
//                      store <-- seq (tiles, skew, readout, epilogue) <-- array <-'
//
// Single-ID AXI: read data returns in order; every beat is accepted as it comes.
module tsr_top #(
  parameter int unsigned Rows = 16,
  parameter int unsigned Cols = 16,
  parameter int unsigned KMax = 4096,
  parameter int unsigned AxiDataWidth = 256,
  parameter int unsigned MaxReads = 16,
  parameter int unsigned Bf16 = 0,      // 1: the BF16 precision is built (CFG_ARRAY.BF16)
  localparam bit          HasBf16 = Bf16 != 0,
  localparam int unsigned AW = HasBf16 ? tsr_fp_pkg::OP_A_W : 8,  // an operand on its way to the array
  localparam int unsigned BW = HasBf16 ? tsr_fp_pkg::OP_B_W : 8,
  localparam int unsigned SumW = HasBf16 ? tsr_fp_pkg::PE_OUT_W : 32,  // a PE's result
  localparam int unsigned AddrWidth = tsr_pkg::ADDR_BITS
) (
  input  logic                      clk_i,
  input  logic                      rst_ni,
  // AXI4-Lite slave: control and status registers
  input  logic                      s_axil_awvalid_i,
  output logic                      s_axil_awready_o,
  input  logic [11:0]               s_axil_awaddr_i,
  input  logic                      s_axil_wvalid_i,
  output logic                      s_axil_wready_o,
  input  logic [31:0]               s_axil_wdata_i,
  input  logic [3:0]                s_axil_wstrb_i,
  output logic                      s_axil_bvalid_o,
  input  logic                      s_axil_bready_i,
  output logic [1:0]                s_axil_bresp_o,
  input  logic                      s_axil_arvalid_i,
  output logic                      s_axil_arready_o,
  input  logic [11:0]               s_axil_araddr_i,
  output logic                      s_axil_rvalid_o,
  input  logic                      s_axil_rready_i,
  output logic [31:0]               s_axil_rdata_o,
  output logic [1:0]                s_axil_rresp_o,
  // AXI4 master: device memory
  output logic                      m_axi_arvalid_o,
  input  logic                      m_axi_arready_i,
  output logic [AddrWidth-1:0]      m_axi_araddr_o,
  output logic [7:0]                m_axi_arlen_o,
  output logic [2:0]                m_axi_arsize_o,
  output logic [1:0]                m_axi_arburst_o,
  input  logic                      m_axi_rvalid_i,
  output logic                      m_axi_rready_o,
  input  logic [AxiDataWidth-1:0]   m_axi_rdata_i,
  input  logic [1:0]                m_axi_rresp_i,
  input  logic                      m_axi_rlast_i,
  output logic                      m_axi_awvalid_o,
  input  logic                      m_axi_awready_i,
  output logic [AddrWidth-1:0]      m_axi_awaddr_o,
  output logic [7:0]                m_axi_awlen_o,
  output logic [2:0]                m_axi_awsize_o,
  output logic [1:0]                m_axi_awburst_o,
  output logic                      m_axi_wvalid_o,
  input  logic                      m_axi_wready_i,
  output logic [AxiDataWidth-1:0]   m_axi_wdata_o,
  output logic [AxiDataWidth/8-1:0] m_axi_wstrb_o,
  output logic                      m_axi_wlast_o,
  input  logic                      m_axi_bvalid_i,
  output logic                      m_axi_bready_o,
  input  logic [1:0]                m_axi_bresp_i,
`ifndef SYNTHESIS
  // fault injection for the health checks, simulation only (see tsr_array)
  input  logic [15:0]               fault_pe_i,
  input  logic [31:0]               fault_set_i,
  input  logic [31:0]               fault_clr_i,
`endif
  output logic                      irq_o
);
  localparam int unsigned KW = $clog2(KMax);
  localparam int unsigned BeatShift = $clog2(AxiDataWidth / 8);
  localparam int unsigned TagWidth = tsr_int_pkg::rd_tag_bits(KMax, AxiDataWidth);
  localparam int unsigned BeatsWidth = tsr_pkg::BEATS_BITS;
  localparam int unsigned RowW = $clog2(Rows);
  localparam int unsigned ColW = $clog2(Cols);

  // CSR <-> ctrl
  logic enable, soft_reset, clear, irq_done, irq_error;
  logic [63:0] ring_base, err_addr;
  logic [31:0] ring_size, ring_tail, err_desc, ring_head, completed, last_tag;
  logic        ring_size_bad;
  logic [2:0] status;
  logic [7:0] err_code;
  logic [tsr_pkg::NUM_COUNTERS*64-1:0] counters;

  // the GEMM: started by ctrl, configured from its descriptor
  logic start, abort;
  tsr_pkg::gemm_cfg_t cfg;
  logic bf16;  // the GEMM's precision is BF16 (constant 0 where the engine lacks it)
  assign bf16 = HasBf16 && cfg.precision == tsr_pkg::PREC_BF16;

  // read path
  logic desc_req_valid, desc_req_ready;
  logic [AddrWidth-1:0] desc_req_addr;
  logic req_valid, req_ready;
  logic [AddrWidth-1:0] req_addr;
  logic [BeatsWidth-1:0] req_beats;
  logic [TagWidth-1:0] req_tag;
  logic [BeatsWidth:0] req_burst;
  logic rsp_valid, rsp_last, rd_err, rd_idle, desc_valid;
  logic [AxiDataWidth-1:0] rsp_data;
  logic [TagWidth-1:0] rsp_tag;
  logic [BeatsWidth-1:0] rsp_beat;
  logic [AddrWidth-1:0] rsp_addr, rd_err_addr;

  // slots
  logic [3:0] a_fill, a_rel, a_full;
  logic [1:0] b_fill, c_fill, b_rel, c_rel, p_rel, b_full, c_full;

  // scratchpad <-> sequencer <-> array
  logic [Rows-1:0] row_valid, row_first, row_last;
  logic [Rows*(KW+1)-1:0] a_rd_addr;
  logic [Cols-1:0] b_rd_slot;
  logic [Cols*KW-1:0] b_rd_k;
  logic [Rows*2-1:0] a_rd_slot;
  logic [Rows*AW-1:0] a_data;
  logic [Rows*9-1:0] a_blk;
  logic [Cols*BW-1:0] b_data;
  logic [Cols*8-1:0] b2_data, shift;
  logic [Cols*9-1:0] b_blk;
  logic [RowW-1:0] row_sel;
  logic [Cols*SumW-1:0] arr_row;
  logic [8:0] arr_row_blk;
  logic cin_rd_slot, p_slot, m_slot;
  logic [RowW-1:0] cin_rd_row;
  logic [Cols*32-1:0] cin_data, bias, mult;
  logic perr, stall, gemm_done, step, tile;
  logic [15:0] spad_rd_bytes;
  logic [AddrWidth-1:0] perr_addr;

  // store
  logic out_valid, out_pop, store_idle, store_quiet, wr_err;
  logic [Cols*32-1:0] out_data;
  logic [AddrWidth-1:0] out_addr, wr_err_addr;
  logic [ColW:0] out_cols;
  logic [BeatShift:0] wr_bytes;

  tsr_csr #(
    .Rows(Rows), .Cols(Cols), .KMax(KMax), .AxiDataWidth(AxiDataWidth), .MaxReads(MaxReads),
    .Bf16(HasBf16)
  ) u_csr (
    .clk_i, .rst_ni,
    .s_awvalid_i (s_axil_awvalid_i), .s_awready_o(s_axil_awready_o), .s_awaddr_i(s_axil_awaddr_i),
    .s_wvalid_i  (s_axil_wvalid_i),  .s_wready_o (s_axil_wready_o),  .s_wdata_i (s_axil_wdata_i),
    .s_wstrb_i   (s_axil_wstrb_i),
    .s_bvalid_o  (s_axil_bvalid_o),  .s_bready_i (s_axil_bready_i),  .s_bresp_o (s_axil_bresp_o),
    .s_arvalid_i (s_axil_arvalid_i), .s_arready_o(s_axil_arready_o), .s_araddr_i(s_axil_araddr_i),
    .s_rvalid_o  (s_axil_rvalid_o),  .s_rready_i (s_axil_rready_i),  .s_rdata_o (s_axil_rdata_o),
    .s_rresp_o   (s_axil_rresp_o),
    .enable_o    (enable),
    .soft_reset_o(soft_reset),
    .ring_base_o (ring_base),
    .ring_size_o (ring_size),
    .ring_size_bad_o(ring_size_bad),
    .ring_tail_o (ring_tail),
    .clear_i     (clear),
    .status_i    (status),
    .irq_done_i  (irq_done),
    .irq_error_i (irq_error),
    .err_code_i  (err_code),
    .err_addr_i  (err_addr),
    .err_desc_i  (err_desc),
    .ring_head_i (ring_head),
    .completed_i (completed),
    .last_tag_i  (last_tag),
    .counters_i  (counters),
    .irq_o
  );

  tsr_ctrl #(.Rows(Rows), .Cols(Cols), .KMax(KMax), .AxiDataWidth(AxiDataWidth), .Bf16(HasBf16)) u_ctrl (
    .clk_i, .rst_ni,
    .enable_i(enable), .soft_reset_i(soft_reset), .ring_base_i(ring_base),
    .ring_size_i(ring_size), .ring_size_bad_i(ring_size_bad), .ring_tail_i(ring_tail),
    .clear_o(clear), .status_o(status), .irq_done_o(irq_done), .irq_error_o(irq_error),
    .err_code_o(err_code), .err_addr_o(err_addr), .err_desc_o(err_desc),
    .ring_head_o(ring_head), .completed_o(completed), .last_tag_o(last_tag),
    .counters_o(counters),
    .desc_req_valid_o(desc_req_valid), .desc_req_ready_i(desc_req_ready),
    .desc_req_addr_o(desc_req_addr),
    .desc_beat_valid_i(desc_valid), .desc_beat_data_i(rsp_data), .desc_beat_idx_i(rsp_beat),
    .desc_beat_last_i(rsp_last),
    .abort_o(abort), .start_o(start), .cfg_o(cfg),
    .gemm_done_i(gemm_done), .store_idle_i(store_idle), .store_quiet_i(store_quiet),
    .rd_idle_i(rd_idle),
    .rd_err_i(rd_err), .rd_err_addr_i(rd_err_addr), .wr_err_i(wr_err), .wr_err_addr_i(wr_err_addr),
    .param_err_i(perr), .param_err_addr_i(perr_addr),
    .stall_i(stall), .rd_beat_i(rsp_valid), .wr_bytes_i(wr_bytes),
    .step_i(step), .tile_i(tile), .spad_rd_bytes_i(spad_rd_bytes)
  );

  tsr_loader #(.Rows(Rows), .Cols(Cols), .KMax(KMax), .AxiDataWidth(AxiDataWidth)) u_loader (
    .clk_i, .rst_ni, .clear_i(clear), .abort_i(abort),
    .start_i(start), .cfg_i(cfg), .bf16_i(bf16),
    .desc_req_valid_i(desc_req_valid), .desc_req_ready_o(desc_req_ready),
    .desc_req_addr_i(desc_req_addr),
    .a_fill_i(a_fill), .b_fill_i(b_fill), .c_fill_i(c_fill),
    .a_rel_i(a_rel), .b_rel_i(b_rel), .c_rel_i(c_rel), .p_rel_i(p_rel),
    .a_full_o(a_full), .b_full_o(b_full), .c_full_o(c_full),
    .req_valid_o(req_valid), .req_ready_i(req_ready), .req_addr_o(req_addr),
    .req_beats_o(req_beats), .req_tag_o(req_tag), .req_burst_o(req_burst)
  );

  tsr_axi_rd #(.DataWidth(AxiDataWidth), .TagWidth(TagWidth), .MaxReads(MaxReads)) u_axi_rd (
    .clk_i, .rst_ni, .clear_i(clear), .abort_i(abort),
    .req_valid_i(req_valid), .req_ready_o(req_ready), .req_addr_i(req_addr),
    .req_beats_i(req_beats), .req_tag_i(req_tag), .req_burst_i(req_burst),
    .rsp_valid_o(rsp_valid), .rsp_data_o(rsp_data), .rsp_tag_o(rsp_tag), .rsp_beat_o(rsp_beat),
    .rsp_last_o(rsp_last), .rsp_addr_o(rsp_addr),
    .err_o(rd_err), .err_addr_o(rd_err_addr), .idle_o(rd_idle),
    .m_arvalid_o(m_axi_arvalid_o), .m_arready_i(m_axi_arready_i), .m_araddr_o(m_axi_araddr_o),
    .m_arlen_o(m_axi_arlen_o), .m_arsize_o(m_axi_arsize_o), .m_arburst_o(m_axi_arburst_o),
    .m_rvalid_i(m_axi_rvalid_i), .m_rready_o(m_axi_rready_o), .m_rdata_i(m_axi_rdata_i),
    .m_rresp_i(m_axi_rresp_i), .m_rlast_i(m_axi_rlast_i)
  );

  tsr_scratch #(.Rows(Rows), .Cols(Cols), .KMax(KMax), .AxiDataWidth(AxiDataWidth), .Bf16(HasBf16)) u_scratch (
    .clk_i, .rst_ni, .fold_i(cfg.fold), .bf16_i(bf16), .k_i(cfg.k[KW:0]),
    .rsp_valid_i(rsp_valid), .rsp_data_i(rsp_data), .rsp_tag_i(rsp_tag), .rsp_beat_i(rsp_beat),
    .rsp_last_i(rsp_last), .rsp_addr_i(rsp_addr),
    .a_fill_o(a_fill), .b_fill_o(b_fill), .c_fill_o(c_fill), .desc_valid_o(desc_valid),
    .perr_o(perr), .perr_addr_o(perr_addr),
    .a_rd_addr_i(a_rd_addr), .a_rd_slot_i(a_rd_slot), .a_data_o(a_data), .a_blk_o(a_blk),
    .b_rd_slot_i(b_rd_slot), .b_rd_k_i(b_rd_k), .b_data_o(b_data), .b2_data_o(b2_data),
    .cin_rd_slot_i(cin_rd_slot), .cin_rd_row_i(cin_rd_row), .cin_data_o(cin_data),
    .p_slot_i(p_slot), .m_slot_i(m_slot), .bias_o(bias), .mult_o(mult), .shift_o(shift), .b_blk_o(b_blk)
  );

  tsr_array #(.Rows(Rows), .Cols(Cols), .Fold(tsr_int_pkg::fold_ok(Rows, Cols, AxiDataWidth)), .Bf16(HasBf16)) u_array (
    .clk_i, .rst_ni, .clear_i(clear),
    .a_i(a_data), .a_blk_i(a_blk), .valid_i(row_valid), .first_i(row_first), .last_i(row_last),
    .b_i(b_data), .fold_i(cfg.fold), .b2_i(b2_data), .row_sel_i(row_sel),
`ifndef SYNTHESIS
    .fault_pe_i, .fault_set_i, .fault_clr_i,
`endif
    .row_o(arr_row), .row_blk_o(arr_row_blk)
  );

  tsr_seq #(.Rows(Rows), .Cols(Cols), .KMax(KMax), .AxiDataWidth(AxiDataWidth), .Bf16(HasBf16)) u_seq (
    .clk_i, .rst_ni, .clear_i(clear), .abort_i(abort),
    .start_i(start), .cfg_i(cfg), .bf16_i(bf16),
    .a_full_i(a_full), .b_full_i(b_full), .c_full_i(c_full),
    .a_rel_o(a_rel), .b_rel_o(b_rel), .c_rel_o(c_rel), .p_rel_o(p_rel),
    .a_rd_addr_o(a_rd_addr), .a_rd_slot_o(a_rd_slot), .b_rd_slot_o(b_rd_slot), .b_rd_k_o(b_rd_k),
    .row_valid_o(row_valid), .row_first_o(row_first), .row_last_o(row_last),
    .row_sel_o(row_sel), .row_i(arr_row), .row_blk_i(arr_row_blk),
    .cin_rd_slot_o(cin_rd_slot), .cin_rd_row_o(cin_rd_row), .cin_data_i(cin_data),
    .p_slot_o(p_slot), .m_slot_o(m_slot), .bias_i(bias), .mult_i(mult), .shift_i(shift), .b_blk_i(b_blk),
    .out_valid_o(out_valid), .out_data_o(out_data), .out_addr_o(out_addr), .out_cols_o(out_cols),
    .out_pop_i(out_pop), .stall_o(stall), .done_o(gemm_done),
    .step_o(step), .tile_o(tile), .spad_rd_bytes_o(spad_rd_bytes)
  );

  tsr_store #(.Rows(Rows), .Cols(Cols), .AxiDataWidth(AxiDataWidth)) u_store (
    .clk_i, .rst_ni, .clear_i(clear), .abort_i(abort),
    .out_shift_i(tsr_int_pkg::out_shift(cfg.out_mode)),
    .in_valid_i(out_valid), .in_data_i(out_data), .in_addr_i(out_addr), .in_cols_i(out_cols),
    .pop_o(out_pop), .idle_o(store_idle), .quiet_o(store_quiet),
    .err_o(wr_err), .err_addr_o(wr_err_addr), .wbytes_o(wr_bytes),
    .m_awvalid_o(m_axi_awvalid_o), .m_awready_i(m_axi_awready_i), .m_awaddr_o(m_axi_awaddr_o),
    .m_awlen_o(m_axi_awlen_o), .m_awsize_o(m_axi_awsize_o), .m_awburst_o(m_axi_awburst_o),
    .m_wvalid_o(m_axi_wvalid_o), .m_wready_i(m_axi_wready_i), .m_wdata_o(m_axi_wdata_o),
    .m_wstrb_o(m_axi_wstrb_o), .m_wlast_o(m_axi_wlast_o),
    .m_bvalid_i(m_axi_bvalid_i), .m_bready_o(m_axi_bready_o), .m_bresp_i(m_axi_bresp_i)
  );

endmodule
