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
// With Bf16 the operands are 16 bits and bf16_i (the GEMM's precision) selects the BF16 step: the
// same multiplier forms the significands' product (tsr_fp_pkg::mul_operand), the product's sign,
// exponent and class are registered beside it, and the accumulator takes the fp32 sum rounded once
// (tsr_fp_pkg::fma_step), in the same two cycles as int8. The float logic sits behind the precision
// in procedural code, so an int8 GEMM does not pay for it in simulation.
module tsr_pe #(
  parameter bit           Bf16 = 1'b0,
  parameter bit           OwnCtl2 = 1'b1,  // keep the product's control here, not take ctl2_i
  localparam int unsigned OpW = Bf16 ? 16 : 8
) (
  input  logic           clk_i,
  input  logic           rst_ni,
  input  logic           clear_i,
  input  logic           bf16_i,
  // from the left: A operand and its control {valid, first, last}
  input  logic [OpW-1:0] a_i,
  input  logic [2:0]     ctl_i,
  // from above: B operand
  input  logic [OpW-1:0] b_i,
  // to the right / below
  output logic [OpW-1:0] a_o,
  output logic [2:0]     ctl_o,
  // {valid, first, last} a cycle after ctl_o, aligned with the product: the right neighbour holds
  // it (its ctl_o), so only the last column keeps a register of its own (OwnCtl2)
  input  logic [2:0]     ctl2_i,
  output logic [OpW-1:0] b_o,
  output logic [31:0]    out_o   // registered: the last finished sum
);
  logic [OpW-1:0] a_q, b_q;
  logic [2:0]     ctl_q;   // {valid, first, last}: aligned with the operands, and forwarded
  logic [2:0]     ctl2;    // the same, aligned with the product
  logic           valid_q, first_q, last_q;
  logic [15:0]    prod_q;  // int8: the product; bf16: the significands' product
  logic [14:0]    info_q;  // bf16: the product's class, sign and exponent
  logic [31:0]    acc_q, sum;
  logic           float_step;

  assign {valid_q, first_q, last_q} = ctl2;
  assign float_step = Bf16 && bf16_i;
  always_comb begin
    if (float_step) sum = tsr_fp_pkg::fma_step(first_q ? tsr_fp_pkg::NEG_ZERO : acc_q, info_q, prod_q);
    else            sum = (first_q ? 32'd0 : acc_q) + 32'($signed(prod_q));
  end

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
    if (Bf16) prod_q <= 16'($signed(tsr_fp_pkg::mul_operand(bf16_i, a_q[7:0])) *
                            $signed(tsr_fp_pkg::mul_operand(bf16_i, b_q[7:0])));
    else      prod_q <= 16'($signed(a_q[7:0]) * $signed(b_q[7:0]));
    if (float_step) info_q <= tsr_fp_pkg::mul_info(16'(a_q), 16'(b_q));
    if (valid_q) acc_q <= sum;
    if (valid_q && last_q) out_o <= sum;
  end

  assign a_o   = a_q;
  assign b_o   = b_q;
  assign ctl_o = ctl_q;
endmodule
