// One processing element of the output-stationary array: an int8 x int8 multiply (registered, so it
// maps onto a DSP48's M register) feeding an int32 accumulator. The operand that arrives with
// `first` starts a new sum; the one with `last` also copies the finished sum into out_o, where it
// waits to be read while the accumulator already works on the next tile. Written for simulation
// speed as well (the whole array is a thousand of these per cycle on the large preset): the three
// control bits travel as one register, the accumulator and result registers are written under
// enables, and out_o is the register itself, with no copy in between.
module tsr_pe (
  input  logic        clk_i,
  input  logic        rst_ni,
  input  logic        clear_i,
  // from the left: A operand and its control {valid, first, last}
  input  logic [7:0]  a_i,
  input  logic [2:0]  ctl_i,
  // from above: B operand
  input  logic [7:0]  b_i,
  // to the right / below
  output logic [7:0]  a_o,
  output logic [2:0]  ctl_o,
  output logic [7:0]  b_o,
  output logic [31:0] out_o   // registered: the last finished sum
);
  logic [7:0]  a_q, b_q;
  logic [2:0]  ctl_q;  // {valid, first, last}: aligned with the product, and forwarded
  logic        valid_q, first_q, last_q;
  logic [15:0] prod_q;
  logic [31:0] acc_q, sum;

  assign {valid_q, first_q, last_q} = ctl_q;
  assign sum = (first_q ? 32'd0 : acc_q) + 32'($signed(prod_q));

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

  // Datapath: no reset, so the multiply and accumulate pack into a DSP48 (the enables are its CE).
  always_ff @(posedge clk_i) begin
    a_q    <= a_i;
    b_q    <= b_i;
    prod_q <= 16'($signed(a_i) * $signed(b_i));
    if (valid_q) acc_q <= sum;
    if (valid_q && last_q) out_o <= sum;
  end

  assign a_o   = a_q;
  assign b_o   = b_q;
  assign ctl_o = ctl_q;
endmodule
