// The BF16 precision's float arithmetic (docs/ENGINE.md, "BF16 numerics"), as functions the PEs
// and the epilogue call; the golden model's bf16_numerics.hpp is its C++ twin.
//
// The adder takes two finite operands in one form, (-1)^s x m x 2^(e - 150) with m[23] set (or
// m = 0 for a zero) and e fp32's biased exponent made wider, because a bf16 product's exponent runs
// from -125 to 382. It aligns the smaller operand with guard, round and sticky bits, adds, and
// normalizes: three extra bits round correctly, since a subtraction that shifts left by more than
// one lost no bits in the alignment. Then it rounds to nearest even, and only then compares with the
// range (a result of 2^128 or more is an infinity, one below 2^-126 a zero, both signed).
package tsr_fp_pkg;
  localparam logic [31:0] QNAN = 32'h7fc00000;  // the one NaN the engine writes
  localparam logic [31:0] NEG_ZERO = 32'h80000000;  // a PE's sum starts here: -0 + x is x

  // x + y of two finite operands in the form above, rounded once to fp32 bits. Two paths, as fast
  // float adders have, so that no sum goes through both a long alignment and a long normalization:
  //  - near: a subtraction of operands whose exponents differ by at most one. The alignment is a
  //    shift by 0 or 1 and loses nothing, but the difference may cancel to any width, so it is
  //    normalized by its leading zeros. With equal exponents both differences are formed, and the
  //    non-negative one is the magnitude (no comparison of the significands first).
  //  - far: every other sum. The alignment may shift far (guard, round, sticky), but the sum is in
  //    [2^25, 2^28) in units of the sticky bit: normalizing is a shift by one at most.
  // Both then round the same way (nearest even on guard, round, sticky) and check the range.
  function automatic logic [31:0] add_finite(logic xs, logic signed [10:0] xe, logic [23:0] xm,
                                             logic ys, logic signed [10:0] ye, logic [23:0] ym);
    logic               swap, ls, ss, sub, near, neg, sign, inc;
    logic signed [10:0] le, se, e, fe, ne;
    logic signed [11:0] d;
    logic [23:0]        lm, sm;
    logic [4:0]         dd, lz;
    logic [49:0]        wide;
    logic [26:0]        sal, fnorm, nnorm, norm;
    logic [27:0]        fsum, nsum, nswap;
    logic [24:0]        man;
    // The larger exponent leads; a zero never does unless both are zero.
    swap = xm == '0 || (ym != '0 && ye > xe);
    ls = swap ? ys : xs;
    le = swap ? ye : xe;
    lm = swap ? ym : xm;
    ss = swap ? xs : ys;
    se = swap ? xe : ye;
    sm = swap ? xm : ym;
    d    = {le[10], le} - {se[10], se};
    sub  = ls != ss;
    near = sub && sm != '0 && d <= 12'sd1;
    // Far: align the smaller with guard, round and the sticky OR of whatever falls below; from a
    // distance of 26 on (or a zero, whose exponent means nothing) only the sticky bit is left.
    dd   = (sm == '0 || d > 12'sd26) ? 5'd26 : d[4:0];
    wide = {sm, 26'd0} >> dd;
    sal  = {wide[49:24], |wide[23:0]};
    fsum = sub ? {1'b0, lm, 3'b000} - {1'b0, sal} : {1'b0, lm, 3'b000} + {1'b0, sal};
    if (fsum[27])      begin fnorm = {fsum[27:2], |fsum[1:0]}; fe = le + 11'sd1; end
    else if (fsum[26]) begin fnorm = fsum[26:0];               fe = le;          end
    else               begin fnorm = {fsum[25:0], 1'b0};       fe = le - 11'sd1; end
    // Near: exact differences; with equal exponents the smaller operand may be the leading one.
    nsum  = {1'b0, lm, 3'b000} - (d[0] ? {2'b00, sm, 2'b00} : {1'b0, sm, 3'b000});
    nswap = {1'b0, sm, 3'b000} - {1'b0, lm, 3'b000};
    neg   = !d[0] && nsum[27];
    if (neg) nsum = nswap;
    // The leading zeros of nsum[26:0]: a priority choice of constants, not a chain of counters.
    lz = 5'd26;
    for (int i = 0; i <= 26; i++) if (nsum[i]) lz = 5'(26 - i);
    nnorm = nsum[26:0] << lz;
    ne    = le - 11'(lz);
    norm = near ? nnorm : fnorm;
    e    = near ? ne : fe;
    sign = near && neg ? ss : ls;
    inc = norm[2] && (norm[1] || norm[0] || norm[3]);
    man = {1'b0, norm[26:3]} + 25'(inc);
    if (man[24]) e = e + 11'sd1;  // rounded up to the next power of two
    if (near ? nsum == '0 : fsum == '0) add_finite = {ls && ss, 31'd0};  // exact zero: -0 only from -0 + -0
    else if (e >= 11'sd255)             add_finite = {sign, 8'hff, 23'd0};
    else if (e <= 11'sd0)               add_finite = {sign, 31'd0};
    else                                add_finite = {sign, e[7:0], man[24] ? man[23:1] : man[22:0]};
  endfunction

  // x + y of two finite operands in the form above, rounded once to fp32 bits.
  // x + y for fp32 bits: the epilogue's C_in and bias. Subnormals read as zeros.
  function automatic logic [31:0] add_fp32(logic [31:0] x, logic [31:0] y);
    logic x_inf, y_inf, x_nan, y_nan;
    x_nan = x[30:23] == 8'hff && x[22:0] != '0;
    y_nan = y[30:23] == 8'hff && y[22:0] != '0;
    x_inf = x[30:23] == 8'hff && x[22:0] == '0;
    y_inf = y[30:23] == 8'hff && y[22:0] == '0;
    if (x_nan || y_nan || (x_inf && y_inf && x[31] != y[31])) add_fp32 = QNAN;
    else if (x_inf)                                           add_fp32 = x;
    else if (y_inf)                                           add_fp32 = y;
    else add_fp32 = add_finite(x[31], {3'd0, x[30:23]}, (x[30:23] == '0) ? 24'd0 : {1'b1, x[22:0]},
                               y[31], {3'd0, y[30:23]}, (y[30:23] == '0) ? 24'd0 : {1'b1, y[22:0]});
  endfunction

  // What a PE registers of a bf16 product besides its significands' product (which it shares with
  // the int8 multiply): {nan, inf, zero, sign, exponent}, the exponent as add_finite takes it
  // before the product's own normalization (+1 where the significands' product reaches 2^15).
  function automatic logic [14:0] mul_info(logic [15:0] a, logic [15:0] b);
    logic a_zero, b_zero, a_inf, b_inf, a_nan, b_nan, nan, inf;
    a_zero = a[14:7] == '0;
    b_zero = b[14:7] == '0;
    a_inf  = a[14:7] == 8'hff && a[6:0] == '0;
    b_inf  = b[14:7] == 8'hff && b[6:0] == '0;
    a_nan  = a[14:7] == 8'hff && a[6:0] != '0;
    b_nan  = b[14:7] == 8'hff && b[6:0] != '0;
    nan    = a_nan || b_nan || (a_inf && b_zero) || (b_inf && a_zero);
    inf    = (a_inf || b_inf) && !nan;
    mul_info = {nan, inf, (a_zero || b_zero) && !nan && !inf, a[15] ^ b[15],
                11'({3'd0, a[14:7]}) + 11'({3'd0, b[14:7]}) - 11'sd127};
  endfunction

  // The significands' multiplier operands: int8 sign-extended, or the bf16 significands (the
  // hidden one and 7 fraction bits), so one 9 x 9 signed multiply serves both precisions.
  function automatic logic [8:0] mul_operand(logic bf16, logic [7:0] x);
    mul_operand = bf16 ? {2'b01, x[6:0]} : {x[7], x[7:0]};
  endfunction

  // One PE step in BF16: acc + the registered product (info from mul_info, sig the significands'
  // product, in [2^14, 2^16)), rounded once.
  function automatic logic [31:0] fma_step(logic [31:0] acc, logic [14:0] info, logic [15:0] sig);
    logic p_nan, p_inf, p_zero, p_sign, acc_inf, acc_nan;
    logic signed [10:0] p_exp;
    {p_nan, p_inf, p_zero, p_sign, p_exp} = info;
    acc_nan = acc[30:23] == 8'hff && acc[22:0] != '0;
    acc_inf = acc[30:23] == 8'hff && acc[22:0] == '0;
    if (p_nan || acc_nan || (p_inf && acc_inf && p_sign != acc[31])) fma_step = QNAN;
    else if (p_inf)                                                  fma_step = {p_sign, 8'hff, 23'd0};
    else if (acc_inf)                                                fma_step = acc;
    else fma_step = add_finite(acc[31], {3'd0, acc[30:23]}, (acc[30:23] == '0) ? 24'd0 : {1'b1, acc[22:0]},
                               p_sign, p_exp + 11'(sig[15]),
                               p_zero ? 24'd0 : (sig[15] ? {sig, 8'd0} : {sig[14:0], 9'd0}));
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
