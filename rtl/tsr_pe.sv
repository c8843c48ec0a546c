// One processing element of the output-stationary array: an int8 x int8 multiply (registered, so it
// maps onto a DSP48's M register) feeding an int32 accumulator. The multiply takes the operands
// from the registers that also forward them to the neighbours, a cycle after they arrive: the
// multiplier's input then starts at a flip-flop, not at the scratchpads' read ports (issue #42). The operand that arrives with
// `first` starts a new sum; the one with `last` also copies the finished sum into out_o, where it
// waits to be read while the accumulator already works on the next tile. Written for simulation
// speed as well (the whole array is a thousand of these per cycle on the large preset): the three
// control bits travel as one register, the accumulator and result registers are written under
// enables, and out_o is the register itself, with no copy in between.
//
// With Bf16 the operands are the scratchpad's fixed-point ones, {inf, zero, sign, fixed} (an int8
// operand sign-extended, its flags clear): the multiply is 20 x 18 bits, one DSP48E1 with its
// 48-bit accumulator, and three flags beside the sum say whether an infinity or a NaN (inf x 0,
// infinities of both signs) came out of a product (docs/ENGINE.md, "BF16 numerics"). The same
// datapath serves both precisions, with no choice between them in the PE.
module tsr_pe #(
  parameter bit           Bf16 = 1'b0,
  parameter bit           OwnCtl2 = 1'b1,  // keep the product's control here, not take ctl2_i
  localparam int unsigned AW = Bf16 ? tsr_fp_pkg::OP_A_W : 8,
  localparam int unsigned BW = Bf16 ? tsr_fp_pkg::OP_B_W : 8,
  localparam int unsigned OutW = Bf16 ? tsr_fp_pkg::PE_OUT_W : 32
) (
  input  logic            clk_i,
  input  logic            rst_ni,
  input  logic            clear_i,
  // from the left: A operand and its control {valid, first, last}
  input  logic [AW-1:0]   a_i,
  input  logic [2:0]      ctl_i,
  // from above: B operand
  input  logic [BW-1:0]   b_i,
  // to the right / below
  output logic [AW-1:0]   a_o,
  output logic [2:0]      ctl_o,
  // {valid, first, last} a cycle after ctl_o, aligned with the product: the right neighbour holds
  // it (its ctl_o), so only the last column keeps a register of its own (OwnCtl2)
  input  logic [2:0]      ctl2_i,
  output logic [BW-1:0]   b_o,
  output logic [OutW-1:0] out_o   // registered: the last finished sum (Bf16: with its flags)
);
  localparam int unsigned SumW = Bf16 ? tsr_fp_pkg::SUM_W : 32;
  localparam int unsigned FixAW = Bf16 ? tsr_fp_pkg::FIX_A + 1 : 8;  // the operands' values, signed
  localparam int unsigned FixBW = Bf16 ? tsr_fp_pkg::FIX_B + 1 : 8;
  localparam int unsigned ProdW = FixAW + FixBW;
  logic [AW-1:0]   a_q;
  logic [BW-1:0]   b_q;
  logic [2:0]      ctl_q;   // {valid, first, last}: aligned with the operands, and forwarded
  logic [2:0]      ctl2;    // the same, aligned with the product
  logic            valid_q, first_q, last_q;
  logic [ProdW-1:0] prod_q;
  logic [SumW-1:0] acc_q, sum;

  assign {valid_q, first_q, last_q} = ctl2;
  assign sum = (first_q ? '0 : acc_q) + SumW'($signed(prod_q));

  // Control: asynchronous reset and soft clear.
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      ctl_q <= '0;
    end else if (clear_i) begin
      ctl_q <= '0;
    end else begin
      ctl_q <= ctl_i;
    end
  end
  if (OwnCtl2) begin : g_own_ctl2
    logic [2:0] ctl2_q;
    always_ff @(posedge clk_i or negedge rst_ni) begin
      if (!rst_ni)      ctl2_q <= '0;
      else if (clear_i) ctl2_q <= '0;
      else              ctl2_q <= ctl_q;
    end
    assign ctl2 = ctl2_q;
    logic unused_ctl2;
    assign unused_ctl2 = ^ctl2_i;
  end else begin : g_shared_ctl2
    assign ctl2 = ctl2_i;
  end

  // Datapath: no reset, so the multiply and accumulate pack into a DSP48 (the enables are its CE).
  always_ff @(posedge clk_i) begin
    a_q    <= a_i;
    b_q    <= b_i;
    prod_q <= ProdW'($signed(a_q[FixAW-1:0]) * $signed(b_q[FixBW-1:0]));
    if (valid_q) acc_q <= sum;
  end

  if (Bf16) begin : g_flags
    // The product's specials, registered beside it: inf x 0 is a NaN, else an infinity has the
    // product's sign. They gather over the sum as its bits do.
    logic a_inf, a_zero, b_inf, b_zero, p_nan, p_inf;
    logic [2:0] prod_flags_q, acc_flags_q, flags;  // {nan, +inf, -inf}
    assign {a_inf, a_zero} = a_q[AW-1 -: 2];
    assign {b_inf, b_zero} = b_q[BW-1 -: 2];
    assign p_nan = (a_inf && b_zero) || (a_zero && b_inf);
    assign p_inf = (a_inf || b_inf) && !p_nan;
    assign flags = (first_q ? 3'b000 : acc_flags_q) | prod_flags_q;
    always_ff @(posedge clk_i) begin
      prod_flags_q <= {p_nan, p_inf && !(a_q[AW-3] ^ b_q[BW-3]), p_inf && (a_q[AW-3] ^ b_q[BW-3])};
      if (valid_q) acc_flags_q <= flags;
      if (valid_q && last_q) out_o <= {flags, sum};
    end
  end else begin : g_int8
    always_ff @(posedge clk_i) if (valid_q && last_q) out_o <= sum;
  end

  assign a_o   = a_q;
  assign b_o   = b_q;
  assign ctl_o = ctl_q;
endmodule
