// The checks the engine makes on a fetched descriptor, in the order and with the meaning of
// docs/registers.md and the golden model's validate(): the first that fails gives the error code
// and the value ERR_ADDR reports. Each check's outcome is registered (tsr_ctrl's CDecode cycle) and
// the first failing one is picked from those flip-flops in the next (CCheck): the comparisons and
// the priority among them in one cycle were one of the paths that held the clock down (issue #42).
module tsr_desc_check #(
  parameter int unsigned Rows = 16,
  parameter int unsigned Cols = 16,
  parameter int unsigned KMax = 4096,
  parameter int unsigned AxiDataWidth = 256,
  parameter bit          Bf16 = 1'b0
) (
  input  logic           clk_i,
  input  tsr_pkg::desc_t desc_i,        // held from the cycle before code_o is read
  input  logic [63:0]    desc_addr_i,   // where the descriptor sits (ERR_ADDR of descriptor faults)
  output logic           fail_o,        // a check of desc_i as it was in the previous cycle failed,
  output logic [7:0]     code_o,        // the first one's code
  output logic [63:0]    addr_o
);
  localparam int unsigned AddrWidth = tsr_pkg::ADDR_BITS;
  localparam int unsigned NumChecked = 11;

  logic int8, bf16, prec_bad, mode_bad, fold_bad_mode, fold_bad_dim;
  logic [33:0] out_row_bytes;
  assign int8 = desc_i.out_mode == tsr_pkg::OUT_INT8;
  assign bf16 = desc_i.precision == tsr_pkg::PREC_BF16;
  assign prec_bad = !(desc_i.precision == tsr_pkg::PREC_INT8 || (Bf16 && bf16));
  // Each precision has its two output modes; RELU is the float modes' (int8 clamps instead).
  assign mode_bad = (bf16 ? desc_i.out_mode < tsr_pkg::OUT_FP32 : desc_i.out_mode > tsr_pkg::OUT_INT8) ||
                    (desc_i.relu && !bf16);
  // FOLD: only where the array supports it, with plain int32 results, and within one band.
  assign fold_bad_mode = desc_i.fold && (!tsr_int_pkg::fold_ok(Rows, Cols, AxiDataWidth) || bf16 || int8 ||
                                         desc_i.bias || desc_i.accumulate);
  assign fold_bad_dim  = desc_i.fold && (desc_i.m > 32'(Rows / 2) || desc_i.k > 32'(KMax / 2));
  // A C row's bytes: int8 1, bf16 2, int32 and fp32 4 per element.
  assign out_row_bytes = int8 ? 34'(desc_i.n) :
                         desc_i.out_mode == tsr_pkg::OUT_BF16 ? {1'b0, desc_i.n, 1'b0} : {desc_i.n, 2'b00};

  // The addresses and strides, each with whether this descriptor uses it and whether it is an
  // address (checked against the address width) or a stride.
  logic [63:0] chk_val  [NumChecked];
  logic        chk_used [NumChecked];
  logic        chk_is_addr [NumChecked];
  always_comb begin
    chk_val[0]  = desc_i.a_addr;         chk_used[0]  = 1'b1;              chk_is_addr[0]  = 1'b1;
    chk_val[1]  = 64'(desc_i.lda);       chk_used[1]  = 1'b1;              chk_is_addr[1]  = 1'b0;
    chk_val[2]  = desc_i.b_addr;         chk_used[2]  = 1'b1;              chk_is_addr[2]  = 1'b1;
    chk_val[3]  = 64'(desc_i.ldb);       chk_used[3]  = 1'b1;              chk_is_addr[3]  = 1'b0;
    chk_val[4]  = desc_i.c_addr;         chk_used[4]  = 1'b1;              chk_is_addr[4]  = 1'b1;
    chk_val[5]  = 64'(desc_i.ldc);       chk_used[5]  = 1'b1;              chk_is_addr[5]  = 1'b0;
    chk_val[6]  = desc_i.cin_addr;       chk_used[6]  = desc_i.accumulate; chk_is_addr[6]  = 1'b1;
    chk_val[7]  = 64'(desc_i.ldcin);     chk_used[7]  = desc_i.accumulate; chk_is_addr[7]  = 1'b0;
    chk_val[8]  = desc_i.bias_addr;      chk_used[8]  = desc_i.bias;       chk_is_addr[8]  = 1'b1;
    chk_val[9]  = desc_i.mult_addr;      chk_used[9]  = int8;              chk_is_addr[9]  = 1'b1;
    chk_val[10] = desc_i.shift_addr;     chk_used[10] = int8;              chk_is_addr[10] = 1'b1;
  end

  // The outcomes: the descriptor's own faults, then per address or stride its alignment, then the
  // strides against the row lengths, then per address the address width.
  logic opcode_bad, gemm, dim_bad, param_bad;
  logic [NumChecked-1:0] align_bad, wide_bad;
  logic [3:0] stride_bad;  // lda, ldb, ldc, ldcin
  always_comb begin
    opcode_bad = desc_i.opcode != tsr_pkg::OP_GEMM && desc_i.opcode != tsr_pkg::OP_NOP;
    gemm       = desc_i.opcode == tsr_pkg::OP_GEMM;
    dim_bad    = desc_i.m == '0 || desc_i.n == '0 || desc_i.k == '0 || desc_i.m > tsr_pkg::DIM_MAX ||
                 desc_i.n > tsr_pkg::DIM_MAX || desc_i.k > (bf16 ? 32'(KMax / 2) : 32'(KMax)) || fold_bad_dim;
    param_bad  = int8 && $signed(desc_i.act_min) > $signed(desc_i.act_max);
    for (int i = 0; i < NumChecked; i++) begin
      align_bad[i] = chk_used[i] && chk_val[i][$clog2(tsr_pkg::ALIGN_BYTES)-1:0] != '0;
      wide_bad[i]  = chk_used[i] && chk_is_addr[i] && chk_val[i][63:AddrWidth] != '0;
    end
    // bf16 operands are two bytes each
    stride_bad[0] = 33'(desc_i.lda) < (bf16 ? {desc_i.k, 1'b0} : 33'(desc_i.k));
    stride_bad[1] = 33'(desc_i.ldb) < (bf16 ? {desc_i.n, 1'b0} : 33'(desc_i.n));
    stride_bad[2] = 34'(desc_i.ldc) < out_row_bytes;
    stride_bad[3] = desc_i.accumulate && 34'(desc_i.ldcin) < {desc_i.n, 2'b00};
  end

  // The outcomes, registered, and their OR (fail_o: the start of a GEMM waits for it alone).
  logic opcode_bad_q, gemm_q, prec_bad_q, mode_bad_q, dim_bad_q, param_bad_q, fail_q;
  logic [NumChecked-1:0] align_bad_q, wide_bad_q;
  logic [3:0] stride_bad_q;
  always_ff @(posedge clk_i) begin
    opcode_bad_q <= opcode_bad;
    gemm_q       <= gemm;
    prec_bad_q   <= prec_bad;
    mode_bad_q   <= mode_bad || fold_bad_mode;
    dim_bad_q    <= dim_bad;
    param_bad_q  <= param_bad;
    align_bad_q  <= align_bad;
    wide_bad_q   <= wide_bad;
    stride_bad_q <= stride_bad;
    fail_q       <= opcode_bad || (gemm && (prec_bad || mode_bad || fold_bad_mode || dim_bad || param_bad ||
                                            align_bad != '0 || wide_bad != '0));
  end
  assign fail_o = fail_q || (gemm_q && stride_bad_q != '0);  // the strides' comparisons are the slow ones

  logic [63:0] stride_val [4];
  assign stride_val[0] = 64'(desc_i.lda);
  assign stride_val[1] = 64'(desc_i.ldb);
  assign stride_val[2] = 64'(desc_i.ldc);
  assign stride_val[3] = 64'(desc_i.ldcin);

  always_comb begin
    code_o = tsr_pkg::ERR_NONE;
    addr_o = '0;
    if (opcode_bad_q) begin
      code_o = tsr_pkg::ERR_OPCODE;
      addr_o = desc_addr_i;
    end else if (gemm_q) begin
      if (prec_bad_q) begin
        code_o = tsr_pkg::ERR_PRECISION;
        addr_o = desc_addr_i;
      end else if (mode_bad_q) begin
        code_o = tsr_pkg::ERR_MODE;
        addr_o = desc_addr_i;
      end else if (dim_bad_q) begin
        code_o = tsr_pkg::ERR_DIM;
        addr_o = desc_addr_i;
      end else if (param_bad_q) begin
        code_o = tsr_pkg::ERR_PARAM;
        addr_o = desc_addr_i;
      end else if (align_bad_q != '0) begin
        code_o = tsr_pkg::ERR_ALIGN;
        for (int i = NumChecked - 1; i >= 0; i--) if (align_bad_q[i]) addr_o = chk_val[i];
      end else if (stride_bad_q != '0) begin
        code_o = tsr_pkg::ERR_STRIDE;
        for (int i = 3; i >= 0; i--) if (stride_bad_q[i]) addr_o = stride_val[i];
      end else if (wide_bad_q != '0) begin
        code_o = tsr_pkg::ERR_ADDR;
        for (int i = NumChecked - 1; i >= 0; i--) if (wide_bad_q[i]) addr_o = chk_val[i];
      end
    end
  end
endmodule
