// AXI4 read master. Takes requests of whole beats at a beat-aligned address, splits them into
// INCR bursts of at most 256 beats that never cross a 4 KB boundary, keeps up to MaxReads bursts
// in flight (one ID, so data returns in order), and hands each data beat back with the request's
// tag and the beat's index within the request.
module tsr_axi_rd #(
  parameter int unsigned DataWidth = 256,
  parameter int unsigned TagWidth = 16,
  parameter int unsigned MaxReads = 16,
  localparam int unsigned AddrWidth = tsr_pkg::ADDR_BITS,
  localparam int unsigned BeatsWidth = tsr_pkg::BEATS_BITS   // request length field width
) (
  input  logic                   clk_i,
  input  logic                   rst_ni,
  input  logic                   clear_i,
  input  logic                   abort_i,     // stop issuing bursts; in-flight ones still drain
  // requests
  input  logic                   req_valid_i,
  output logic                   req_ready_o,
  input  logic [AddrWidth-1:0]   req_addr_i,
  input  logic [BeatsWidth-1:0]  req_beats_i,  // >= 1
  input  logic [TagWidth-1:0]    req_tag_i,
  input  logic [BeatsWidth:0]    req_burst_i,  // its first burst, {last, else its beats} (tsr_first_burst)
  // data beats
  output logic                   rsp_valid_o,
  output logic [DataWidth-1:0]   rsp_data_o,
  output logic [TagWidth-1:0]    rsp_tag_o,
  output logic [BeatsWidth-1:0]  rsp_beat_o,
  output logic                   rsp_last_o,   // last beat of the request
  output logic [AddrWidth-1:0]   rsp_addr_o,   // address of the beat's burst
  // bus error: first failing burst's address
  output logic                   err_o,
  output logic [AddrWidth-1:0]   err_addr_o,
  output logic                   idle_o,       // nothing in flight or pending
  // AXI4 AR/R
  output logic                   m_arvalid_o,
  input  logic                   m_arready_i,
  output logic [AddrWidth-1:0]   m_araddr_o,
  output logic [7:0]             m_arlen_o,
  output logic [2:0]             m_arsize_o,
  output logic [1:0]             m_arburst_o,
  input  logic                   m_rvalid_i,
  output logic                   m_rready_o,
  input  logic [DataWidth-1:0]   m_rdata_i,
  input  logic [1:0]             m_rresp_i,
  input  logic                   m_rlast_i
);
  localparam int unsigned BeatBytes = DataWidth / 8;
  localparam int unsigned BeatShift = $clog2(BeatBytes);
  localparam int unsigned PageW = $clog2(tsr_pkg::PAGE_BYTES);
  localparam int unsigned PageIdxW = PageW - BeatShift;  // a beat's index within its page
  localparam int unsigned TrackW = TagWidth + BeatsWidth + 1 + AddrWidth;

  // The request being split into bursts.
  logic                  busy_q, busy_d;
  logic [AddrWidth-1:0]  addr_q, addr_d;
  logic [BeatsWidth-1:0] left_q, left_d, done_q, done_d;
  logic [TagWidth-1:0]   tag_q, tag_d;
  logic [BeatsWidth-1:0] cap_q, req_cap, rest_cap;  // the current burst's beats unless it is the last
  logic                  last_q, req_last, rest_last;  // the burst ends the request: its beats are left_q
  logic [BeatsWidth-1:0] burst;                     // the current burst's beats
  logic                  ar_fire, track_full, track_empty;
  logic [$clog2(MaxReads):0] track_count;
  logic [TrackW-1:0]     track_in, track_out;
  logic [TagWidth-1:0]   trk_tag;
  logic                  trk_last;
  logic [AddrWidth-1:0]  trk_addr;
  logic [BeatsWidth-1:0] beat_q, beat_d;  // the next beat's index in its request
  logic                  err_q, err_d;
  logic                  ar_hold_q, ar_hold_d;  // AR valid awaiting ready: must not be withdrawn
  logic [AddrWidth-1:0]  err_addr_q, err_addr_d;

  // The current burst's length and whether it ends the request are registered with the address
  // and count they follow from: computed in front of the AR handshake, their adder and comparisons
  // held the engine's clock down (issue #42). A new request brings its first burst worked out
  // (tsr_rd_arb); the rest of a request's are worked out here for the address and count after
  // this burst, and the handshake picks one.
  localparam int unsigned PageBeats = tsr_pkg::PAGE_BYTES / BeatBytes;
  assign {req_last, req_cap} = req_burst_i;
  assign burst = last_q ? left_q : cap_q;
  if (PageBeats <= tsr_pkg::MAX_BURST_BEATS) begin : g_rest_page
    // A burst that is not its request's last (the only kind with a rest) ends at its page's end,
    // so the rest starts a page: its next burst is the last where left <= cap + the page's beats,
    // one comparison (cap_q is at most the page's beats, so that sum is a matter of its top bits,
    // not an adder), or else the whole page.
    logic [BeatsWidth:0] fit;
    assign fit       = {(BeatsWidth-PageIdxW)'(cap_q[PageIdxW]), !cap_q[PageIdxW], cap_q[PageIdxW-1:0]};
    assign rest_last = {1'b0, left_q} <= fit;
    assign rest_cap  = BeatsWidth'(PageBeats);
  end else begin : g_rest_any
    tsr_first_burst #(.DataWidth(DataWidth)) u_rest_burst (
      .beats_i      (left_q - cap_q),
      .page_offset_i({PageIdxW'(addr_q[PageW-1:BeatShift] + PageIdxW'(cap_q)), BeatShift'(0)}),
      .last_o       (rest_last),
      .cap_o        (rest_cap)
    );
  end

  // After an abort, a request cut short keeps busy_q until the soft reset's clear, which comes with
  // abort already low: no burst may start then, or the clear would forget it while the memory
  // still answers it (found by tsr_fifo_sva's a_fifo_no_pop_when_empty).
  assign m_arvalid_o = busy_q && !track_full && !clear_i && (!abort_i || ar_hold_q);
  assign m_araddr_o  = addr_q;
  assign m_arlen_o   = 8'(burst - 1'b1);
  assign m_arsize_o  = 3'(BeatShift);
  assign m_arburst_o = 2'b01;  // INCR
  assign ar_fire     = m_arvalid_o && m_arready_i;
  // A new request may start in the cycle the last burst of the current one is issued.
  assign req_ready_o = (!busy_q || (ar_fire && last_q)) && !abort_i;
  assign ar_hold_d   = m_arvalid_o && !m_arready_i;

  always_comb begin
    busy_d = busy_q;
    addr_d = addr_q;
    left_d = left_q;
    done_d = done_q;
    tag_d  = tag_q;
    if (ar_fire) begin
      busy_d = !last_q;
      addr_d = addr_q + (AddrWidth'(burst) << BeatShift);
      left_d = left_q - burst;
      done_d = done_q + burst;
    end
    if (req_valid_i && req_ready_o) begin
      busy_d = 1'b1;
      addr_d = req_addr_i;
      left_d = req_beats_i;
      done_d = '0;
      tag_d  = req_tag_i;
    end
    if (clear_i) busy_d = 1'b0;
  end

  // Bursts in flight, oldest first: the oldest in a register (head_q), the others in the FIFO
  // behind it. The beats' tag and addresses then come from flip-flops, not from the FIFO's LUT RAM,
  // so the scratchpads' write decode and the checks behind a beat begin at flip-flops (issue #42).
  // A burst goes straight to the register when the FIFO is empty and the register free or being
  // freed (by its last beat), so it is there the cycle after AR, as a FIFO's head would be; the
  // register is empty only when the FIFO is. MaxReads bounds both together.
  localparam int unsigned HeadW = TagWidth + 1 + AddrWidth;
  logic              head_valid_q, head_free, to_head, fifo_full;
  logic [TrackW-1:0] next_head;  // the register's next burst: the FIFO's oldest, or the one issued now
  logic [TagWidth-1:0]   next_tag;
  logic [BeatsWidth-1:0] next_base;
  logic                  next_last;
  logic [AddrWidth-1:0]  next_addr;
  logic [HeadW-1:0]  head_q;     // its tag, last flag and address; its first beat's index is beat_q
  assign head_free  = !head_valid_q || (m_rvalid_i && m_rlast_i);
  assign to_head    = head_free && track_empty;
  assign track_in   = {tag_q, done_q, last_q, addr_q};
  logic [$clog2(MaxReads):0] in_flight_q;  // bursts in the register and the FIFO
  assign track_full = in_flight_q == ($clog2(MaxReads)+1)'(MaxReads);
  assign next_head  = track_empty ? track_in : track_out;
  assign {next_tag, next_base, next_last, next_addr} = next_head;
  assign {trk_tag, trk_last, trk_addr} = head_q;

  tsr_fifo #(.Width(TrackW), .Depth(MaxReads)) u_track (
    .clk_i, .rst_ni, .clear_i,
    .push_i (ar_fire && !to_head),
    .data_i (track_in),
    .full_o (fifo_full),  // never: in_flight_q bounds it
    .pop_i  (head_free && !track_empty),
    .data_o (track_out),
    .empty_o(track_empty),
    .count_o(track_count)
  );
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      head_valid_q <= 1'b0;
      in_flight_q  <= '0;
    end else if (clear_i) begin
      head_valid_q <= 1'b0;
      in_flight_q  <= '0;
    end else begin
      if (head_free) head_valid_q <= !track_empty || ar_fire;
      in_flight_q <= in_flight_q + ($clog2(MaxReads)+1)'(ar_fire) -
                     ($clog2(MaxReads)+1)'(head_valid_q && m_rvalid_i && m_rlast_i);
    end
  end
  always_ff @(posedge clk_i) begin
    if (head_free) head_q <= {next_tag, next_last, next_addr};
  end

  // Every beat is accepted at once: destinations are reserved before a request is made.
  assign m_rready_o  = 1'b1;
  assign rsp_valid_o = m_rvalid_i;
  assign rsp_data_o  = m_rdata_i;
  assign rsp_tag_o   = trk_tag;
  assign rsp_beat_o  = beat_q;
  assign rsp_last_o  = m_rlast_i && trk_last;
  assign rsp_addr_o  = trk_addr;

  always_comb begin
    beat_d = beat_q;
    if (head_free)       beat_d = next_base;
    else if (m_rvalid_i) beat_d = beat_q + 1'b1;
    err_d      = err_q;
    err_addr_d = err_addr_q;
    if (m_rvalid_i && m_rresp_i[1] && !err_q) begin
      err_d      = 1'b1;
      err_addr_d = trk_addr;
    end
    if (clear_i) begin
      beat_d = '0;
      err_d  = 1'b0;
    end
  end

  assign err_o      = err_q;
  assign err_addr_o = err_addr_q;
  assign idle_o     = !head_valid_q && !ar_hold_q && (!busy_q || abort_i);

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      busy_q     <= 1'b0;
      addr_q     <= '0;
      left_q     <= '0;
      done_q     <= '0;
      tag_q      <= '0;
      beat_q     <= '0;
      err_q      <= 1'b0;
      err_addr_q <= '0;
      ar_hold_q  <= 1'b0;
      cap_q      <= '0;
      last_q     <= 1'b0;
    end else begin
      busy_q     <= busy_d;
      addr_q     <= addr_d;
      left_q     <= left_d;
      done_q     <= done_d;
      tag_q      <= tag_d;
      beat_q     <= beat_d;
      err_q      <= err_d;
      err_addr_q <= err_addr_d;
      ar_hold_q  <= ar_hold_d;
      if (req_valid_i && req_ready_o) begin
        cap_q   <= req_cap;
        last_q  <= req_last;
      end else if (ar_fire) begin
        cap_q   <= rest_cap;
        last_q  <= rest_last;
      end
    end
  end

  logic unused_track_count;
  assign unused_track_count = ^track_count ^ m_rresp_i[0] ^ fifo_full;
endmodule
