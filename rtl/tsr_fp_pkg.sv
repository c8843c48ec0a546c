// The BF16 precision's arithmetic (docs/ENGINE.md, "BF16 numerics"), as functions the scratchpad,
// the PEs and the epilogue call; the golden model's bf16_numerics.hpp is its C++ twin.
//
// A PE's sum is block floating point: the scratchpad turns each bf16 operand into an integer
// relative to its block (an A row of the tile, a B column of the column block: the largest
// exponent among their finite nonzero elements), the PE sums the exact products in its DSP48's
// 48-bit accumulator, and the epilogue rounds the sum to fp32 once (fixed_to_fp32) before its fp32
// adds of C_in and the bias.
//
// The fp32 adder (C_in's and the bias's) orders its operands by magnitude, aligns the smaller with
// guard, round and sticky bits, adds or subtracts, and normalizes by the leading zeros of what is
// left. Three extra bits round correctly: a subtraction that loses bits in the alignment (operands
// two or more binades apart) shifts left by one at most. Then it rounds to nearest even, and only
// then compares with the range (a result of 2^128 or more is an infinity, one below 2^-126 a zero,
// both signed). It is three pipeline stages: add_order, add_sum, add_round.
package tsr_fp_pkg;
  localparam logic [31:0] QNAN = 32'h7fc00000;  // the one NaN the engine writes
  // Block floating point: an operand's magnitude bits in the array (A on the DSP48E1's 25-bit
  // port, B on its 18-bit one, both signed), and the sum's scale: S x 2^(ea + eb - SUM_EXP_OFFSET).
  localparam int unsigned FIX_A = 19;
  localparam int unsigned FIX_B = 17;
  localparam int unsigned OP_A_W = FIX_A + 4;  // an A operand in the array: {inf, zero, sign, fixed}
  localparam int unsigned OP_B_W = FIX_B + 4;
  localparam int unsigned SUM_W = 48;          // a PE's fixed-point sum: |S| < 2^47 for K <= 2048
  localparam int unsigned PE_OUT_W = SUM_W + 3;  // {nan, +inf, -inf, S}
  localparam int SUM_EXP_OFFSET = 2 * 134 + (FIX_A - 8) + (FIX_B - 8);

  // Two leading-zero counts of 2^k bits each (2^k: all zeros), the high half's and the low half's,
  // as the count of their 2^(k+1) bits.
  function automatic logic [6:0] lz_merge(logic [6:0] hi, logic [6:0] lo, int k);
    logic [6:0] half;
    half = 7'(1) << k;
    if (!hi[k])     lz_merge = hi;
    else if (lo[k]) lz_merge = 7'(1) << (k + 1);
    else            lz_merge = half | (lo & (half - 7'(1)));
  endfunction

  // The leading zeros of x (64 if none is set), as a tree of merges: the priority form is a chain
  // of 64 choices, the longest path there was.
  function automatic logic [6:0] lzc64(logic [63:0] x);
    logic [32*7-1:0] c1;
    logic [16*7-1:0] c2;
    logic [8*7-1:0]  c3;
    logic [4*7-1:0]  c4;
    logic [2*7-1:0]  c5;
    for (int i = 0; i < 32; i++) c1[i*7 +: 7] = !x[2*i+1] ? (!x[2*i] ? 7'd2 : 7'd1) : 7'd0;
    for (int i = 0; i < 16; i++) c2[i*7 +: 7] = lz_merge(c1[(2*i+1)*7 +: 7], c1[2*i*7 +: 7], 1);
    for (int i = 0; i < 8; i++)  c3[i*7 +: 7] = lz_merge(c2[(2*i+1)*7 +: 7], c2[2*i*7 +: 7], 2);
    for (int i = 0; i < 4; i++)  c4[i*7 +: 7] = lz_merge(c3[(2*i+1)*7 +: 7], c3[2*i*7 +: 7], 3);
    for (int i = 0; i < 2; i++)  c5[i*7 +: 7] = lz_merge(c4[(2*i+1)*7 +: 7], c4[2*i*7 +: 7], 4);
    lzc64 = lz_merge(c5[7 +: 7], c5[0 +: 7], 5);
  endfunction

  // x + y of two fp32 operands, rounded once (subnormals read as zeros). One path, as a small float
  // adder has: the alignment, the sum and its leading zeros, then the normalization and rounding.
  // Three pipeline stages: add_order orders the operands by magnitude, add_sum aligns and adds (and
  // counts the leading zeros), add_round normalizes, rounds to nearest even on guard, round and
  // sticky, and checks the range. Each passes on {special, its bits, ...}, where special says the
  // result is already known (a NaN or an infinity).
  localparam int unsigned ADD_ORDER_W = 1 + 32 + 3 + 8 + 5 + 24 + 24;
  localparam int unsigned ADD_SUM_W = 1 + 32 + 2 + 8 + 28 + 5;

  function automatic logic [ADD_ORDER_W-1:0] add_order(logic [31:0] x, logic [31:0] y);
    logic        x_inf, y_inf, x_nan, y_nan, special, swap;
    logic [31:0] special_bits, l, s;
    logic [7:0]  dxy, dyx, d;
    logic [23:0] lm, sm;
    x_nan = x[30:23] == 8'hff && x[22:0] != '0;
    y_nan = y[30:23] == 8'hff && y[22:0] != '0;
    x_inf = x[30:23] == 8'hff && x[22:0] == '0;
    y_inf = y[30:23] == 8'hff && y[22:0] == '0;
    special = x_nan || y_nan || x_inf || y_inf;
    if (x_nan || y_nan || (x_inf && y_inf && x[31] != y[31])) special_bits = QNAN;
    else if (x_inf)                                           special_bits = x;
    else                                                      special_bits = y;
    // The larger magnitude leads (fp32's magnitudes order as integers), so the difference of the
    // significands is never negative. The exponents' distances are formed beside the comparison.
    swap = y[30:0] > x[30:0];
    dxy  = x[30:23] - y[30:23];
    dyx  = y[30:23] - x[30:23];
    l    = swap ? y : x;
    s    = swap ? x : y;
    d    = swap ? dyx : dxy;
    lm   = l[30:23] == '0 ? 24'd0 : {1'b1, l[22:0]};
    sm   = s[30:23] == '0 ? 24'd0 : {1'b1, s[22:0]};
    // from a distance of 27 on only the sticky bit is left
    add_order = {special, special_bits, l[31] != s[31], l[31], s[31], l[30:23],
                 d[7:5] != '0 ? 5'd31 : d[4:0], lm, sm};
  endfunction

  function automatic logic [ADD_SUM_W-1:0] add_sum(logic [ADD_ORDER_W-1:0] o);
    logic        special, sub, ls, ss, sticky;
    logic [31:0] special_bits;
    logic [7:0]  le;
    logic [4:0]  dd, lz;
    logic [23:0] lm, sm;
    logic [26:0] sal, lost;
    logic [27:0] r;
    {special, special_bits, sub, ls, ss, le, dd, lm, sm} = o;
    // The smaller operand with guard, round and the sticky OR of whatever falls below.
    sal    = {sm, 3'b000} >> dd;
    lost   = {sm, 3'b000} & ~(27'h7ffffff << dd);
    sticky = lost != '0;
    r      = sub ? {1'b0, lm, 3'b000} - {1'b0, sal[26:1], sal[0] | sticky}
                 : {1'b0, lm, 3'b000} + {1'b0, sal[26:1], sal[0] | sticky};
    lz     = 5'(lzc64({r, 36'hfffffffff}));  // 28 where r is zero (then the result is a zero)
    // an exact zero is -0 only from -0 + -0
    add_sum = {special, special_bits, ls, ls && ss, le, r, lz};
  endfunction

  function automatic logic [31:0] add_round(logic [ADD_SUM_W-1:0] s);
    logic              special, sign, zero_sign, inc;
    logic [31:0]       special_bits;
    logic [7:0]        le;
    logic [27:0]       r, norm;
    logic [4:0]        lz;
    logic [24:0]       man;
    logic signed [9:0] e;
    {special, special_bits, sign, zero_sign, le, r, lz} = s;
    // the leading one to bit 27: the significand is norm[27:4], guard norm[3], sticky norm[2:0]
    norm = r << lz;
    e    = 10'(le) + 10'sd1 - 10'(lz);
    inc  = norm[3] && (norm[2:0] != '0 || norm[4]);
    man  = {1'b0, norm[27:4]} + 25'(inc);
    if (man[24]) e = e + 10'sd1;  // rounded up to the next power of two
    if (special)            add_round = special_bits;
    else if (r == '0)       add_round = {zero_sign, 31'd0};
    else if (e >= 10'sd255) add_round = {sign, 8'hff, 23'd0};
    else if (e <= 10'sd0)   add_round = {sign, 31'd0};
    else                    add_round = {sign, e[7:0], man[24] ? man[23:1] : man[22:0]};
  endfunction

  // x + y for fp32 bits, rounded once: the epilogue's C_in and bias, in one step (the cover points).
  function automatic logic [31:0] add_fp32(logic [31:0] x, logic [31:0] y);
    add_fp32 = add_round(add_sum(add_order(x, y)));
  endfunction

  // A block element's part in its block: {NaN, its exponent}, the exponent 0 for an infinity or a
  // NaN (the block's exponent is the largest of its finite nonzero elements').
  function automatic logic [8:0] block_of(logic [14:0] x);  // x: the element without its sign
    block_of = {x[14:7] == 8'hff && x[6:0] != '0, x[14:7] == 8'hff ? 8'd0 : x[14:7]};
  endfunction

  // The larger of two blocks' parts, NaN flags ORed.
  function automatic logic [8:0] block_max(logic [8:0] x, logic [8:0] y);
    block_max = {x[8] || y[8], x[7:0] > y[7:0] ? x[7:0] : y[7:0]};
  endfunction

  // A bf16 operand as the array takes it: {inf, zero, sign, fixed}, fixed = sign x floor(the
  // significand x 2^(lead - (blk - e))) in two's complement, lead = FIX_A - 8 or FIX_B - 8, and 0
  // for zeros (subnormals too), infinities and NaNs, whose class the flags carry. The caller keeps
  // the fixed value's low FIX + 1 bits.
  function automatic logic [FIX_A+3:0] fixed_operand(logic [15:0] x, logic [7:0] blk, int unsigned lead);
    logic        zero, inf;
    logic [7:0]  d;
    logic [26:0]    wide;
    logic [FIX_A:0] value;
    logic           unused_wide;
    zero  = x[14:7] == '0;
    inf   = x[14:7] == 8'hff;
    d     = blk - x[14:7];
    wide  = (27'({1'b1, x[6:0]}) << lead) >> d;  // under 2^(lead + 8)
    value = {1'b0, wide[FIX_A-1:0]};
    unused_wide = ^wide[26:FIX_A];  // zero: the block's largest element has FIX_A bits
    if (zero || inf) value = '0;
    if (x[15])       value = -value;
    fixed_operand = {inf && x[6:0] == '0, zero, x[15], value};
  endfunction

  // A PE's sum as fp32, in three steps: fixed_abs takes its sign and magnitude (in the readout,
  // before the epilogue), fixed_norm shifts the magnitude to its leading one and decides the special
  // cases (the PE's flags and the blocks' NaN flags give a NaN or an infinity), fixed_round rounds
  // it to nearest even and checks the range. An exact zero is +0.
  //   fixed_abs's result:  {nan, +inf, -inf, sign, |S|}, as wide as the PE's
  //   fixed_norm's result: {nan, inf, sign, zero, exponent (biased, 11 bits signed), 24 bits, guard, sticky}
  localparam int unsigned NORM_W = 4 + 11 + 26;
  function automatic logic [PE_OUT_W-1:0] fixed_abs(logic [PE_OUT_W-1:0] sum);
    logic [SUM_W-1:0] mag;  // |S| < 2^(SUM_W - 1)
    logic             unused_top;
    mag = sum[SUM_W-1] ? -sum[SUM_W-1:0] : sum[SUM_W-1:0];
    unused_top = mag[SUM_W-1];
    fixed_abs = {sum[SUM_W +: 3], sum[SUM_W-1], mag[SUM_W-2:0]};
  endfunction

  function automatic logic [NORM_W-1:0] fixed_norm(logic [PE_OUT_W-1:0] a, logic [8:0] ablk, logic [8:0] bblk);
    logic               nan, pinf, ninf, neg;
    logic [SUM_W-2:0]   mag, norm;
    logic [5:0]         lz;
    logic signed [10:0] e;
    {nan, pinf, ninf, neg, mag} = a;
    lz = 6'(lzc64({mag, 17'h1ffff}));  // SUM_W - 1 = 47 where mag is zero
    norm = mag << lz;
    // the leading one, at bit SUM_W - 2 - lz, is worth 2^(that + ea + eb - SUM_EXP_OFFSET)
    e = 11'(ablk[7:0]) + 11'(bblk[7:0]) - 11'(lz) + 11'(SUM_W - 2 + 127 - SUM_EXP_OFFSET);
    fixed_norm = {nan || ablk[8] || bblk[8] || (pinf && ninf), pinf || ninf, pinf || ninf ? ninf : neg, mag == '0,
                  e, norm[SUM_W-2 -: 25], |norm[SUM_W-27:0]};
  endfunction

  function automatic logic [31:0] fixed_round(logic [NORM_W-1:0] n);
    logic               nan, inf, sign, zero, inc;
    logic signed [10:0] e;
    logic [23:0]        sig;
    logic               guard, sticky;
    logic [24:0]        man;
    {nan, inf, sign, zero, e, sig, guard, sticky} = n;
    inc = guard && (sticky || sig[0]);
    man = {1'b0, sig} + 25'(inc);
    if (man[24]) e = e + 11'sd1;  // rounded up to the next power of two
    if (nan)                fixed_round = QNAN;
    else if (inf)           fixed_round = {sign, 8'hff, 23'd0};
    else if (zero)          fixed_round = 32'd0;
    else if (e >= 11'sd255) fixed_round = {sign, 8'hff, 23'd0};
    else if (e <= 11'sd0)   fixed_round = {sign, 31'd0};
    else                    fixed_round = {sign, e[7:0], man[24] ? man[23:1] : man[22:0]};
  endfunction

  // max(x, +0): negatives (-0 and -inf too) become +0; the NaN stays.
  function automatic logic [31:0] relu(logic [31:0] x);
    relu = (x[31] && !(x[30:23] == 8'hff && x[22:0] != '0)) ? 32'd0 : x;
  endfunction

  // fp32 to bf16, nearest even; a carry past the largest bf16 gives inf; the NaN is 0x7fc0.
  function automatic logic [15:0] to_bf16(logic [31:0] x);
    logic [15:0] r;
    r = 16'((x + 32'h7fff + 32'(x[16])) >> 16);
    to_bf16 = (x[30:23] == 8'hff && x[22:0] != '0) ? QNAN[31:16] : r;
  endfunction
endpackage
