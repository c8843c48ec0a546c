// The first AXI burst of a read of beats_i beats at a beat-aligned address: to the 4 KB page's end
// or the burst limit, whichever comes first. It gives whether the burst is the read's last (then
// its beats are the read's) and the beats to that end (the burst's, unless it is the last), so
// that the read master chooses between them after its registers (issue #42). The burst limit
// binds only where a page has more beats than it; else the read fits the page when its beats plus
// the address's beat index are at most the page's beats: one adder, where the beats left in the
// page and a comparison with them would be two carry chains in a row (issue #42). tsr_rd_arb
// works it out for each request beside its choice among them, tsr_axi_rd for the rest of a request
// after each burst: in front of the read master's registered burst in either case (issue #42).
module tsr_first_burst #(
  parameter int unsigned DataWidth = 256,
  localparam int unsigned BeatsWidth = tsr_pkg::BEATS_BITS,
  localparam int unsigned PageW = $clog2(tsr_pkg::PAGE_BYTES)
) (
  input  logic [BeatsWidth-1:0] beats_i,
  input  logic [PageW-1:0]      page_offset_i,  // the address within its page, beat-aligned
  output logic                  last_o,
  output logic [BeatsWidth-1:0] cap_o    // the burst's beats where it is not the read's last
);
  localparam int unsigned BeatShift = $clog2(DataWidth / 8);
  localparam int unsigned IdxW = PageW - BeatShift;  // a beat's index in its page
  logic [PageW:0]         page_left;  // beats to the page's end
  logic [BeatsWidth-1:0]  cap;
  assign page_left = ({1'b1, PageW'(0)} - {1'b0, page_offset_i}) >> BeatShift;
  if (tsr_pkg::PAGE_BYTES / (DataWidth / 8) > tsr_pkg::MAX_BURST_BEATS) begin : g_limit
    assign cap    = page_left > (PageW+1)'(tsr_pkg::MAX_BURST_BEATS) ? BeatsWidth'(tsr_pkg::MAX_BURST_BEATS)
                                                                     : BeatsWidth'(page_left);
    assign last_o = beats_i <= cap;
  end else begin : g_page
    logic [BeatsWidth:0] end_idx;  // the beat index just past the read, from the page's start
    assign cap     = BeatsWidth'(page_left);
    assign end_idx = {1'b0, beats_i} + (BeatsWidth+1)'(page_offset_i[PageW-1:BeatShift]);
    assign last_o  = end_idx[BeatsWidth:IdxW] == '0 || end_idx == (BeatsWidth+1)'(1 << IdxW);
  end
  assign cap_o = cap;
endmodule
