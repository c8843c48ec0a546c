// Epilogue: one array row per cycle, Cols lanes, fully pipelined (Latency cycles).
//   acc = sum + (acc_en ? C_in : 0) + (bias_en ? bias : 0)                       int32, wrapping
//   int32 mode: out = acc
//   int8 mode:  out = clamp(out_zp + MultiplyByQuantizedMultiplier(acc, mult, shift), min, max)
// MultiplyByQuantizedMultiplier is TFLite's reference: SaturatingRoundingDoublingHighMul of
// (acc << left) and mult, then RoundingDivideByPOT(right); left = max(shift, 0), right =
// max(-shift, 0). The row's metadata travels alongside unchanged.
//
// BF16 (Bf16 builds, bf16_i) has a pipeline of its own beside it, as long (tsr_fp_pkg): stages 1
// and 2 round each PE's sum (sign and magnitude, taken in the readout) to fp32 with the row's A
// block and the column's B block, stages 3 to 5 add C_in, 6 to 8 the bias, each rounded; stage 9
// applies RELU and rounds to bf16 for the BF16 output mode, whose lanes leave packed in the low
// Cols*16 bits. Each lane has one fp32 adder for both adds: where a GEMM asks for both, its rows
// come two cycles apart (tsr_seq), so that no two rows need the adder in the same cycle (a row's
// bias add starts three cycles after its C_in add).
module tsr_epilogue #(
  parameter int unsigned Cols = 16,
  parameter int unsigned MetaWidth = 8,
  parameter bit          Bf16 = 1'b0,
  localparam int unsigned SumW = Bf16 ? tsr_fp_pkg::PE_OUT_W : 32,  // a PE's result
  localparam int unsigned Latency = tsr_pkg::EPILOGUE_LATENCY
) (
  input  logic                  clk_i,
  input  logic                  rst_ni,
  input  logic                  clear_i,
  input  logic                  valid_i,
  input  logic [MetaWidth-1:0]  meta_i,
  input  logic [Cols*SumW-1:0]  sum_i,
  input  logic [8:0]            row_blk_i,  // Bf16: the row's A block
  input  logic [Cols*9-1:0]     b_blk_i,    // Bf16: the columns' B blocks
  input  logic [Cols*32-1:0]    cin_i,
  input  logic [Cols*32-1:0]    bias_i,
  input  logic [Cols*32-1:0]    mult_i,   // of the row in stage 1, a cycle after its bias and shifts
  input  logic [Cols*8-1:0]     shift_i,
  input  tsr_pkg::gemm_cfg_t    cfg_i,
  input  logic                  bf16_i,
  output logic                  valid_o,
  output logic [MetaWidth-1:0]  meta_o,
  output logic [Cols*32-1:0]    data_o   // 32-bit lanes, or int8 / bf16 lanes packed in the low bits
);
  logic [Latency-1:0]   valid_q;
  logic [MetaWidth-1:0] meta_q [Latency];

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      valid_q <= '0;
    end else if (clear_i) begin
      valid_q <= '0;
    end else begin
      valid_q <= {valid_q[Latency-2:0], valid_i};
    end
  end
  // The last stage is written only with a row: that keeps it out of the shift register (SRL) the
  // others become, whose output is a nanosecond and a half late for the slot releases it drives.
  always_ff @(posedge clk_i) begin
    meta_q[0] <= meta_i;
    for (int s = 1; s < Latency - 1; s++) meta_q[s] <= meta_q[s-1];
    if (valid_q[Latency-2]) meta_q[Latency-1] <= meta_q[Latency-2];
  end

  logic [Cols*8-1:0] out8;
  logic [Cols*16-1:0] out16;
  logic [Cols*32-1:0] out32;
  logic float, bf16_out;
  assign float    = Bf16 && bf16_i;
  assign bf16_out = cfg_i.out_mode == tsr_pkg::OUT_BF16;
`ifndef SYNTHESIS
  logic int8;  // the cover points' mode
  assign int8 = !float && cfg_i.out_mode == tsr_pkg::OUT_INT8;
  // An fp32's class from its magnitude, for the BF16 cover points: 2 NaN, 1 an infinity, 0 other.
  function automatic logic [1:0] fp_class(logic [30:0] magnitude);
    return magnitude[30:23] != 8'hff ? 2'd0 : magnitude[22:0] != '0 ? 2'd2 : 2'd1;
  endfunction
`endif

  for (genvar j = 0; j < Cols; j++) begin : g_lane
    // Stage 1: the int32 sum; split the shift into left and right amounts.
    logic signed [31:0] acc_q, acc_d;
    logic        [4:0]  left1_q, right1_q;
    logic signed [7:0]  shift;
    assign shift = $signed(shift_i[j*8 +: 8]);
    assign acc_d = $signed(sum_i[j*SumW +: 32]) + (cfg_i.accumulate ? $signed(cin_i[j*32 +: 32]) : 32'sd0) +
                   (cfg_i.bias ? $signed(bias_i[j*32 +: 32]) : 32'sd0);

    // Stage 2: x = acc << left (wrapping) and the multiplier, the DSPs' operands. The multiplier is
    // read from the table here, with the slot of the row in stage 1 (mult_i), not registered twice.
    logic signed [31:0] x2_q, y2_q, acc2_q;  // x2_q, y2_q feed only the DSPs: their A and B registers
    logic        [4:0]  right2_q;

    // Stage 3: x * y as four products that each fit a DSP48E1 (25 x 18 signed): the operands'
    // low 17 bits (unsigned) and high 15 bits (signed).
    logic        [33:0] ll3_q;           // low x low, unsigned
    logic signed [32:0] lh3_q, hl3_q;    // low x high, high x low
    logic signed [29:0] hh3_q;           // high x high
    logic        [4:0]  right3_q;
    logic signed [31:0] acc3_q;

    // SaturatingRoundingDoublingHighMul is floor((x * y + 2^30) / 2^31): TFLite's nudge, 2^30 or
    // 1 - 2^30 by the product's sign, and its division toward zero come to that for either sign.
    // Stage 4: the middle products' sum; the low product plus 2^30 (< 2^35); the high product.
    logic signed [33:0] mid4_q;
    logic        [34:0] low4_q;
    logic signed [29:0] hh4_q;
    logic        [4:0]  right4_q;
    logic signed [31:0] acc4_q;

    // Stage 5: low + mid x 2^17, of which only the bits from 31 up matter now; the high product.
    // Saturation, the one product that overflows (x = y = -2^31), seen in the products: the high
    // one is 2^28 only for high halves both -2^14, and then the middle sum, -2^14 x (the low
    // halves' sum), is 0 only for low halves both 0.
    logic signed [20:0] sum5_q;          // bits 51..31
    logic signed [29:0] hh5_q;
    logic               sat5_q;
    logic        [4:0]  right5_q;
    logic signed [31:0] acc5_q;

    // Stage 6: the high half, (hh x 2^34 + sum) / 2^31; saturated. right6_q is written only with a
    // row, which keeps it out of the shift register (SRL) that holds the earlier stages' shifts:
    // an SRL's output is a nanosecond and a half late for the rounding below.
    logic signed [31:0] high6_q, acc6_q;
    logic        [4:0]  right6_q;

    // Stage 7: rounding divide by 2^right, half away from zero: x >> right, and whether to add one
    // (the remainder above half, or at half for a non-negative x), added with the zero point next.
    logic signed [31:0] div7_q, acc7_q;
    logic               round7_q;
    logic        [31:0] below;               // the bits under bit right - 1
    logic               half, rest, round_up;
    assign below    = ~(32'hffffffff << right6_q) >> 1;
    assign half     = right6_q != '0 && high6_q[right6_q - 5'd1];
    assign rest     = (high6_q & below) != '0;
    assign round_up = half && (!high6_q[31] || rest);

    // Stage 8: the zero point and the rounding's one, and the sum's comparisons with the clamp's
    // bounds: only those and its low byte are kept (fewer flip-flops than the sum).
    logic signed [31:0] zp8, acc8_q;     // zp8 wraps as the model's int32 add
    logic               lo8_q, hi8_q;    // zp8 below act_min, above act_max
    logic        [7:0]  zp8_low_q;
    assign zp8 = div7_q + 32'($signed(cfg_i.out_zp)) + 32'(round7_q);

    // Stage 9: the clamp's choice.
    logic signed [7:0]  q9_q;
    logic signed [31:0] acc9_q;

    always_ff @(posedge clk_i) begin
      acc_q    <= acc_d;
      left1_q  <= 5'd0;
      right1_q <= 5'd0;
      if (shift > 8'sd0) left1_q <= shift[4:0];
      else right1_q <= 5'(-shift);

      x2_q     <= acc_q <<< left1_q;
      y2_q     <= $signed(mult_i[j*32 +: 32]);
      right2_q <= right1_q;
      acc2_q   <= acc_q;

      ll3_q    <= 34'(x2_q[16:0]) * 34'(y2_q[16:0]);
      lh3_q    <= $signed({1'b0, x2_q[16:0]}) * $signed(y2_q[31:17]);
      hl3_q    <= $signed(x2_q[31:17]) * $signed({1'b0, y2_q[16:0]});
      hh3_q    <= $signed(x2_q[31:17]) * $signed(y2_q[31:17]);
      right3_q <= right2_q;
      acc3_q   <= acc2_q;

      mid4_q   <= 34'(lh3_q) + 34'(hl3_q);
      low4_q   <= 35'(ll3_q) + 35'(1 << 30);
      hh4_q    <= hh3_q;
      right4_q <= right3_q;
      acc4_q   <= acc3_q;

      sum5_q   <= 21'((52'(low4_q) + (52'(mid4_q) <<< 17)) >>> 31);
      hh5_q    <= hh4_q;
      sat5_q   <= hh4_q == 30'sh10000000 && mid4_q == '0;
      right5_q <= right4_q;
      acc5_q   <= acc4_q;

      high6_q  <= sat5_q ? 32'sh7fffffff : 32'({hh5_q, 3'b000}) + 32'(sum5_q);
      if (valid_q[4]) right6_q <= right5_q;
      acc6_q   <= acc5_q;

      div7_q   <= high6_q >>> right6_q;  // signed: >>> stays arithmetic
      round7_q <= round_up;
      acc7_q   <= acc6_q;

      lo8_q     <= zp8 < 32'($signed(cfg_i.act_min));
      hi8_q     <= zp8 > 32'($signed(cfg_i.act_max));
      zp8_low_q <= zp8[7:0];
      acc8_q    <= acc7_q;

      if (lo8_q)      q9_q <= $signed(cfg_i.act_min);
      else if (hi8_q) q9_q <= $signed(cfg_i.act_max);
      else            q9_q <= zp8_low_q;
      acc9_q   <= acc8_q;
    end
`ifndef SYNTHESIS
    // Cover points of each branch of the int8 requantization (rtl/testplan.toml, requant_corners),
    // counted over every lane: per stage, while the row it holds is valid.
    logic signed [33:0] acc_wide;
    assign acc_wide = 34'($signed(sum_i[j*SumW +: 32])) + (cfg_i.accumulate ? 34'($signed(cin_i[j*32 +: 32])) : '0) +
                      (cfg_i.bias ? 34'($signed(bias_i[j*32 +: 32])) : '0);
    cov_acc_wrap:       cover property (@(posedge clk_i) valid_i && !float && acc_wide != 34'(acc_d));
    cov_rq_left:        cover property (@(posedge clk_i) valid_q[0] && int8 && left1_q != '0);
    cov_rq_left_max:    cover property (@(posedge clk_i) valid_q[0] && int8 && left1_q == 5'd31);
    cov_rq_no_shift:    cover property (@(posedge clk_i) valid_q[0] && int8 && left1_q == '0 && right1_q == '0);
    cov_rq_right:       cover property (@(posedge clk_i) valid_q[0] && int8 && right1_q != '0);
    cov_rq_right_max:   cover property (@(posedge clk_i) valid_q[0] && int8 && right1_q == 5'd31);
    cov_rq_mult_min:    cover property (@(posedge clk_i) valid_q[1] && int8 && y2_q == 32'sh80000000);
    cov_rq_mult_max:    cover property (@(posedge clk_i) valid_q[1] && int8 && y2_q == 32'sh7fffffff);
    cov_rq_mult_zero:   cover property (@(posedge clk_i) valid_q[1] && int8 && y2_q == '0);
    cov_rq_mult_one:    cover property (@(posedge clk_i) valid_q[1] && int8 && y2_q == 32'sd1);
    cov_rq_mult_half:   cover property (@(posedge clk_i) valid_q[1] && int8 && y2_q == 32'sh40000000);
    cov_rq_saturate:    cover property (@(posedge clk_i) valid_q[4] && int8 && sat5_q);
    cov_rq_round_up:    cover property (@(posedge clk_i) valid_q[5] && int8 && right6_q != '0 && round_up);
    cov_rq_round_tie:   cover property (@(posedge clk_i) valid_q[5] && int8 && half && !rest);
    cov_rq_clamp_min:   cover property (@(posedge clk_i) valid_q[7] && int8 && lo8_q);
    cov_rq_clamp_max:   cover property (@(posedge clk_i) valid_q[7] && int8 && hi8_q);
    cov_rq_zp_negative: cover property (@(posedge clk_i) valid_q[7] && int8 && cfg_i.out_zp[7]);
    cov_rq_clamp_negative: cover property (@(posedge clk_i) valid_q[7] && int8 && cfg_i.act_max[7]);
`endif
    assign out8[j*8 +: 8] = q9_q;

    if (Bf16) begin : g_float
      // Stages 1-2: the PE's sum (its sign and magnitude, tsr_fp_pkg::fixed_abs in the readout) as
      // fp32 (fixed_norm, fixed_round). Stages 3-5 add C_in, 6-8 the bias (add_order, add_sum,
      // add_round); stage 9 applies RELU and rounds to bf16. C_in and the bias come with the row
      // and travel with it.
      logic [tsr_fp_pkg::NORM_W-1:0]      norm1_q;
      logic [tsr_fp_pkg::ADD_ORDER_W-1:0] order_q;  // the adder's stages: a C_in add in stage 3 or
      logic [tsr_fp_pkg::ADD_SUM_W-1:0]   sum_q;    // a bias add in stage 6, then the next
      logic [31:0]                        v2_q, v3_q, v4_q, v5_q, v6_q, v7_q, v8_q, v9_q, r8, added;
      logic [31:0]                        cin1_q, cin2_q, bias1_q, bias2_q, bias3_q, bias4_q, bias5_q;
      logic                               cin_add, bias_add;  // a row's add begins (stage 3, stage 6)
      assign cin_add  = float && valid_q[1] && cfg_i.accumulate;
      assign bias_add = float && valid_q[4] && cfg_i.bias;
      assign added    = tsr_fp_pkg::add_round(sum_q);
      assign r8 = cfg_i.relu ? tsr_fp_pkg::relu(v8_q) : v8_q;
      // Each stage is written with a BF16 row only: int8 GEMMs, and the cycles between rows, skip
      // the float logic in simulation (and it is each register's clock enable in hardware).
      always_ff @(posedge clk_i) begin
        // the stages the adds read are written only with a row: that keeps them out of the shift
        // registers (SRLs) the others become, whose outputs are late
        cin1_q <= cin_i[j*32 +: 32];
        {bias1_q, bias2_q, bias3_q, bias4_q} <= {bias_i[j*32 +: 32], bias1_q, bias2_q, bias3_q};
        if (valid_q[0]) cin2_q  <= cin1_q;
        if (valid_q[3]) bias5_q <= bias4_q;
        if (float && valid_i)    norm1_q <= tsr_fp_pkg::fixed_norm(sum_i[j*SumW +: SumW], row_blk_i, b_blk_i[j*9 +: 9]);
        if (float && valid_q[0]) v2_q    <= tsr_fp_pkg::fixed_round(norm1_q);
        if (cin_add || bias_add) order_q <= bias_add ? tsr_fp_pkg::add_order(v5_q, bias5_q)
                                                     : tsr_fp_pkg::add_order(v2_q, cin2_q);
        if (float && ((valid_q[2] && cfg_i.accumulate) || (valid_q[5] && cfg_i.bias)))
          sum_q <= tsr_fp_pkg::add_sum(order_q);
        if (float && valid_q[1]) v3_q <= v2_q;
        if (float && valid_q[2]) v4_q <= v3_q;
        if (float && valid_q[3]) v5_q <= cfg_i.accumulate ? added : v4_q;
        if (float && valid_q[4]) v6_q <= v5_q;
        if (float && valid_q[5]) v7_q <= v6_q;
        if (float && valid_q[6]) v8_q <= cfg_i.bias ? added : v7_q;
        if (float && valid_q[7]) v9_q <= bf16_out ? 32'(tsr_fp_pkg::to_bf16(r8)) : r8;
      end
      assign out16[j*16 +: 16] = v9_q[15:0];
      assign out32[j*32 +: 32] = float ? v9_q : acc9_q;
`ifndef SYNTHESIS
      // BF16's special values through each float step of the epilogue (rtl/testplan.toml,
      // bf16_epilogue_specials): C_in's add, the bias's add, RELU and the rounding to bf16. The
      // classes are plain signals: Verilator 5.006 miscounted cover properties that called a function.
      logic [1:0] v2_c, cin2_c, v5_c, bias5_c, v8_c, r8_c;  // 2: NaN, 1: an infinity, 0: other
      logic [15:0] out_bf16;
      assign v2_c    = fp_class(v2_q[30:0]);
      assign cin2_c  = fp_class(cin2_q[30:0]);
      assign v5_c    = fp_class(v5_q[30:0]);
      assign bias5_c = fp_class(bias5_q[30:0]);
      assign v8_c    = fp_class(v8_q[30:0]);
      assign r8_c    = fp_class(r8[30:0]);
      assign out_bf16 = tsr_fp_pkg::to_bf16(r8);
      // rows two cycles apart through both adds: a C_in add begins as the row ahead rounds its C_in sum
      cov_fp_both_adds:   cover property (@(posedge clk_i) cin_add && valid_q[3] && cfg_i.bias);
      cov_fp_sum_nan:     cover property (@(posedge clk_i) valid_q[1] && float && v2_c == 2'd2);
      cov_fp_sum_inf:     cover property (@(posedge clk_i) valid_q[1] && float && v2_c == 2'd1);
      cov_fp_cin_nan:     cover property (@(posedge clk_i) valid_q[1] && float && cfg_i.accumulate &&
                                          (v2_c == 2'd2 || cin2_c == 2'd2));
      cov_fp_cin_inf:     cover property (@(posedge clk_i) valid_q[1] && float && cfg_i.accumulate &&
                                          (v2_c == 2'd1 || cin2_c == 2'd1));
      cov_fp_cin_inf_minus_inf: cover property (@(posedge clk_i) valid_q[1] && float && cfg_i.accumulate &&
                                                v2_c == 2'd1 && cin2_c == 2'd1 && v2_q[31] != cin2_q[31]);
      cov_fp_bias_nan:    cover property (@(posedge clk_i) valid_q[4] && float && cfg_i.bias &&
                                          (v5_c == 2'd2 || bias5_c == 2'd2));
      cov_fp_bias_inf:    cover property (@(posedge clk_i) valid_q[4] && float && cfg_i.bias &&
                                          (v5_c == 2'd1 || bias5_c == 2'd1));
      cov_fp_bias_inf_minus_inf: cover property (@(posedge clk_i) valid_q[4] && float && cfg_i.bias &&
                                                 v5_c == 2'd1 && bias5_c == 2'd1 && v5_q[31] != bias5_q[31]);
      cov_fp_relu_nan:    cover property (@(posedge clk_i) valid_q[7] && float && cfg_i.relu && v8_c == 2'd2);
      cov_fp_relu_neg_inf: cover property (@(posedge clk_i) valid_q[7] && float && cfg_i.relu && v8_q == 32'hff800000);
      cov_fp_out_nan:     cover property (@(posedge clk_i) valid_q[7] && float && bf16_out && r8_c == 2'd2);
      cov_fp_out_inf:     cover property (@(posedge clk_i) valid_q[7] && float && bf16_out && r8_c == 2'd1);
      cov_fp_out_rounds_to_inf: cover property (@(posedge clk_i) valid_q[7] && float && bf16_out && r8_c == 2'd0 &&
                                                (out_bf16 == 16'h7f80 || out_bf16 == 16'hff80));
`endif
    end else begin : g_int
      assign out16[j*16 +: 16] = '0;
      assign out32[j*32 +: 32] = acc9_q;
    end
  end

  if (!Bf16) begin : g_no_float
    logic unused_float;
    assign unused_float = ^row_blk_i ^ ^b_blk_i ^ float;
  end

  assign valid_o = valid_q[Latency-1];
  assign meta_o  = meta_q[Latency-1];
  assign data_o  = cfg_i.out_mode == tsr_pkg::OUT_INT8 ? {{(Cols*24){1'b0}}, out8} :
                   bf16_out ? {{(Cols*16){1'b0}}, out16} : out32;
endmodule
