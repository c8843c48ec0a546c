// Cover points of the controller's checks at their limits (simulation only, bound into tsr_ctrl by
// tsr_bind.sv; rtl/testplan.toml maps them onto testpoints): each dimension, clamp, stride,
// alignment and address range just inside its limit (the descriptor runs) and just past it (the
// check raises its error), and the ring's size and tail likewise; a soft reset's drain and clear.
module tsr_ctrl_sva #(
  parameter int unsigned KMax = 4096,
  parameter bit          Bf16 = 1'b0,
  localparam int unsigned AddrWidth = tsr_pkg::ADDR_BITS,
  localparam int unsigned AlignW = $clog2(tsr_pkg::ALIGN_BYTES)
) (
  input logic           clk_i,
  input logic           check,       // the checked descriptor's result is in chk_code
  input tsr_pkg::desc_t desc,
  input logic           chk_fail,    // some check failed (the GEMM's start waits for this alone)
  input logic [7:0]     chk_code,
  input logic [63:0]    chk_addr,
  input logic           error_now,   // an error is raised now
  input logic [7:0]     error_code,
  input logic           fetch,       // a descriptor is fetched from the ring
  input logic [31:0]    ring_size,
  input logic [31:0]    ring_tail,
  input logic           reset_draining,  // a soft reset waits for bursts in flight
  input logic           clear_unsafe     // the clear lands with ENABLE set, work pending and the ring bad
);
  logic ok, int8, bf16;
  logic [31:0] k_max;
  logic [63:0] last_addr, last_aligned;
  logic        unused_desc;  // the cover points look at some of its fields
  assign unused_desc = ^desc;
  assign ok    = check && chk_code == tsr_pkg::ERR_NONE;
  assign int8  = desc.out_mode == tsr_pkg::OUT_INT8;
  assign bf16  = Bf16 && desc.precision == tsr_pkg::PREC_BF16;
  assign k_max = bf16 ? 32'(KMax / 2) : 32'(KMax);
  assign last_addr = 64'(1) << AddrWidth;
  assign last_aligned = last_addr - 64'(tsr_pkg::ALIGN_BYTES);
  // A row's bytes: of A, B and C (as tsr_desc_check counts them); the alignment unit.
  logic [33:0] row_a, row_b, row_c, align;
  assign row_a = bf16 ? 34'({desc.k, 1'b0}) : 34'(desc.k);
  assign row_b = bf16 ? 34'({desc.n, 1'b0}) : 34'(desc.n);
  assign row_c = int8 ? 34'(desc.n) : desc.out_mode == tsr_pkg::OUT_BF16 ? 34'({desc.n, 1'b0}) : {desc.n, 2'b00};
  assign align = 34'(tsr_pkg::ALIGN_BYTES);

  cov_dim_m_at_max:   cover property (@(posedge clk_i) ok && desc.m == tsr_pkg::DIM_MAX);
  cov_dim_m_past_max: cover property (@(posedge clk_i) check && desc.m == tsr_pkg::DIM_MAX + 1 &&
                                      chk_code == tsr_pkg::ERR_DIM);
  cov_dim_n_at_max:   cover property (@(posedge clk_i) ok && desc.n == tsr_pkg::DIM_MAX);
  cov_dim_n_past_max: cover property (@(posedge clk_i) check && desc.n == tsr_pkg::DIM_MAX + 1 &&
                                      chk_code == tsr_pkg::ERR_DIM);
  cov_dim_k_at_max:   cover property (@(posedge clk_i) ok && desc.k == k_max);
  cov_dim_k_past_max: cover property (@(posedge clk_i) check && desc.k == k_max + 1 && chk_code == tsr_pkg::ERR_DIM);
  cov_dim_zero:       cover property (@(posedge clk_i) check && (desc.m == '0 || desc.n == '0 || desc.k == '0) &&
                                      chk_code == tsr_pkg::ERR_DIM);
  cov_clamp_equal:    cover property (@(posedge clk_i) ok && int8 && desc.act_min == desc.act_max);
  cov_clamp_past:     cover property (@(posedge clk_i) check && int8 &&
                                      $signed(desc.act_min) == $signed(desc.act_max) + 1 &&
                                      chk_code == tsr_pkg::ERR_PARAM);
  cov_align_plus_one: cover property (@(posedge clk_i) check && chk_code == tsr_pkg::ERR_ALIGN &&
                                      chk_addr[AlignW-1:0] == AlignW'(1));
  cov_align_minus_one: cover property (@(posedge clk_i) check && chk_code == tsr_pkg::ERR_ALIGN &&
                                       chk_addr[AlignW-1:0] == '1);
  cov_stride_exact:   cover property (@(posedge clk_i) ok && !bf16 && (desc.lda == desc.k || desc.ldb == desc.n ||
                                      (int8 && desc.ldc == desc.n) || desc.ldcin == {desc.n[29:0], 2'b00}));
  cov_stride_short:   cover property (@(posedge clk_i) check && chk_code == tsr_pkg::ERR_STRIDE && (
                                      (chk_addr == 64'(desc.lda) && 34'(desc.lda) + align >= row_a) ||
                                      (chk_addr == 64'(desc.ldb) && 34'(desc.ldb) + align >= row_b) ||
                                      (chk_addr == 64'(desc.ldc) && 34'(desc.ldc) + align >= row_c) ||
                                      (chk_addr == 64'(desc.ldcin) && 34'(desc.ldcin) + align >= {desc.n, 2'b00})));
  cov_addr_last:      cover property (@(posedge clk_i) ok && (desc.a_addr == last_aligned ||
                                      desc.b_addr == last_aligned ||
                                      desc.c_addr == last_aligned));
  cov_addr_past:      cover property (@(posedge clk_i) check && chk_code == tsr_pkg::ERR_ADDR && chk_addr == last_addr);
  cov_ring_at_max:    cover property (@(posedge clk_i) fetch && ring_size == tsr_pkg::RING_MAX_ENTRIES);
  cov_ring_past_max:  cover property (@(posedge clk_i) error_now && error_code == tsr_pkg::ERR_RING &&
                                      ring_size > tsr_pkg::RING_MAX_ENTRIES);
  cov_ring_tail_at_size: cover property (@(posedge clk_i) error_now && error_code == tsr_pkg::ERR_RING &&
                                         ring_tail == ring_size);
  cov_reset_draining: cover property (@(posedge clk_i) reset_draining);
  cov_reset_clear_ring_bad: cover property (@(posedge clk_i) clear_unsafe);

  always_ff @(posedge clk_i) begin
    a_ctrl_check_fail_is_code: assert (!check || chk_fail == (chk_code != tsr_pkg::ERR_NONE))
      else begin
        $error("the descriptor check's failure flag %0d disagrees with its code %0d", chk_fail, chk_code);
        tsr_sva_pkg::tsr_assertion_failed($sformatf("%m"));
      end
  end
endmodule
