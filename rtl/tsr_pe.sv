// One processing element of the output-stationary array: an int8 x int8 multiply (registered, so it
// maps onto a DSP48's M register) feeding an int32 accumulator. The operand that arrives with
// `first` starts a new sum; the one with `last` also copies the finished sum into out_q, where it
// waits to be read while the accumulator already works on the next tile.
module tsr_pe (
  input  logic        clk_i,
  input  logic        rst_ni,
  input  logic        clear_i,
  // from the left: A operand and its control
  input  logic [7:0]  a_i,
  input  logic        valid_i,
  input  logic        first_i,
  input  logic        last_i,
  // from above: B operand
  input  logic [7:0]  b_i,
  // to the right / below
  output logic [7:0]  a_o,
  output logic        valid_o,
  output logic        first_o,
  output logic        last_o,
  output logic [7:0]  b_o,
  output logic [31:0] out_o
);
  logic [7:0]  a_q, b_q;
  logic        valid_q, first_q, last_q;     // forwarded control
  logic        mvalid_q, mfirst_q, mlast_q;  // control aligned with the product
  logic [15:0] prod_q;
  logic [31:0] acc_q, acc_d, out_q, out_d, sum;

  assign sum   = (mfirst_q ? 32'd0 : acc_q) + {{16{prod_q[15]}}, prod_q};
  assign acc_d = mvalid_q ? sum : acc_q;
  assign out_d = (mvalid_q && mlast_q) ? sum : out_q;

  // Control: asynchronous reset and soft clear.
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      valid_q  <= 1'b0;
      mvalid_q <= 1'b0;
    end else if (clear_i) begin
      valid_q  <= 1'b0;
      mvalid_q <= 1'b0;
    end else begin
      valid_q  <= valid_i;
      mvalid_q <= valid_i;
    end
  end

  // Datapath: no reset, so the multiply and accumulate pack into a DSP48.
  always_ff @(posedge clk_i) begin
    a_q      <= a_i;
    b_q      <= b_i;
    first_q  <= first_i;
    last_q   <= last_i;
    mfirst_q <= first_i;
    mlast_q  <= last_i;
    prod_q   <= 16'($signed(a_i) * $signed(b_i));
    acc_q    <= acc_d;
    out_q    <= out_d;
  end

  assign a_o     = a_q;
  assign b_o     = b_q;
  assign valid_o = valid_q;
  assign first_o = first_q;
  assign last_o  = last_q;
  assign out_o   = out_q;
endmodule
