// Store unit: buffers finished rows (STORE_ROWS_PER_ARRAY_ROW x Rows deep, which the sequencer's credits never overrun)
// and writes each as an AXI4 INCR burst, or two where the row crosses a 4 KB boundary (a row of
// Cols int32 can be wider than the alignment). Bytes past N are masked with WSTRB. Bursts in
// flight are bounded by MaxWrites; a failing response reports its burst's address.
module tsr_store #(
  parameter int unsigned Rows = 16,
  parameter int unsigned Cols = 16,
  parameter int unsigned AxiDataWidth = 256,
  localparam int unsigned AddrWidth = tsr_pkg::ADDR_BITS,
  localparam int unsigned MaxWrites = tsr_pkg::MAX_WRITES,
  localparam int unsigned ColW = $clog2(Cols)
) (
  input  logic                      clk_i,
  input  logic                      rst_ni,
  input  logic                      clear_i,
  input  logic                      abort_i,    // finish the burst in progress, start no more
  input  logic [1:0]                out_shift_i,  // log2 of C's element bytes: 1, 2 or 4
  // rows
  input  logic                      in_valid_i,
  input  logic [Cols*32-1:0]        in_data_i,
  input  logic [AddrWidth-1:0]      in_addr_i,
  input  logic [ColW:0]             in_cols_i,
  output logic                      pop_o,      // a row left the buffer
  output logic                      idle_o,     // nothing buffered or in flight
  output logic                      quiet_o,    // no burst in progress or awaiting a response
  output logic                      err_o,
  output logic [AddrWidth-1:0]      err_addr_o,
  output logic [$clog2(AxiDataWidth/8):0] wbytes_o,  // bytes written two cycles before
  // AXI4 AW/W/B
  output logic                      m_awvalid_o,
  input  logic                      m_awready_i,
  output logic [AddrWidth-1:0]      m_awaddr_o,
  output logic [7:0]                m_awlen_o,
  output logic [2:0]                m_awsize_o,
  output logic [1:0]                m_awburst_o,
  output logic                      m_wvalid_o,
  input  logic                      m_wready_i,
  output logic [AxiDataWidth-1:0]   m_wdata_o,
  output logic [AxiDataWidth/8-1:0] m_wstrb_o,
  output logic                      m_wlast_o,
  input  logic                      m_bvalid_i,
  output logic                      m_bready_o,
  input  logic [1:0]                m_bresp_i
);
  localparam int unsigned BeatBytes = AxiDataWidth / 8;
  localparam int unsigned BeatShift = $clog2(BeatBytes);
  localparam int unsigned BufBytes = (Cols * 4 > BeatBytes) ? Cols * 4 : BeatBytes;
  localparam int unsigned BufBeats = BufBytes / BeatBytes;
  localparam int unsigned BeatW = (BufBeats > 1) ? $clog2(BufBeats) : 1;
  localparam int unsigned EndW = $clog2(BufBytes) + 1;  // a row's end in its buffer, < 2 x BufBytes
  localparam int unsigned EntryW = Cols * 32 + AddrWidth + EndW + 2 * (BeatW + 1);
  localparam int unsigned Depth = tsr_pkg::STORE_ROWS_PER_ARRAY_ROW * Rows;
  localparam int unsigned PageW = $clog2(tsr_pkg::PAGE_BYTES);

  logic [EntryW-1:0] fifo_out;
  logic fifo_empty, fifo_full, take;
  logic [$clog2(Depth):0] fifo_count;
  logic [Cols*32-1:0] e_data;
  logic [AddrWidth-1:0] e_addr;
  logic [EndW-1:0] e_end;
  logic [BeatW:0] nbeats, row_first_end;  // the row's beats; the end of its first burst

  // A row's end (its first byte's lane plus its bytes), beats and where its first burst ends follow
  // from its address and columns: worked out as it enters the FIFO, so that taking a row starts at
  // the FIFO's output (issue #42).
  logic [EndW-1:0] in_end;
  logic [BeatW:0] in_nbeats, in_first_end;
  logic [PageW:0] in_page_beats;
  assign in_end        = EndW'(in_addr_i[BeatShift-1:0]) + (EndW'(in_cols_i) << out_shift_i);
  assign in_nbeats     = (BeatW+1)'((in_end + EndW'(BeatBytes - 1)) >> BeatShift);
  // beats left in the 4 KB page where the row starts; the first burst stops there
  assign in_page_beats = ((PageW+1)'(tsr_pkg::PAGE_BYTES) - {1'b0, in_addr_i[PageW-1:BeatShift], BeatShift'(0)}) >> BeatShift;
  assign in_first_end  = (in_page_beats < (PageW+1)'(in_nbeats)) ? (BeatW+1)'(in_page_beats) : in_nbeats;

  tsr_fifo #(.Width(EntryW), .Depth(Depth)) u_rows (
    .clk_i, .rst_ni, .clear_i,
    .push_i (in_valid_i),
    .data_i ({in_data_i, in_addr_i, in_end, in_nbeats, in_first_end}),
    .full_o (fifo_full),
    .pop_i  (take),
    .data_o (fifo_out),
    .empty_o(fifo_empty),
    .count_o(fifo_count)
  );
  assign {e_data, e_addr, e_end, nbeats, row_first_end} = fifo_out;
  assign pop_o = take;

  // The row laid out as it sits in memory from its first beat on.
  logic [BeatShift-1:0] lane;
  logic [BufBytes*8-1:0] buf_data;
  logic [BufBytes-1:0]   buf_strb;
  assign lane     = e_addr[BeatShift-1:0];
  // narrower elements come packed in the low bits; WSTRB masks the bytes outside [lane, end)
  assign buf_data = (BufBytes*8)'(e_data) << {lane, 3'b000};
  always_comb begin
    for (int i = 0; i < BufBytes; i++) buf_strb[i] = EndW'(i) >= EndW'(lane) && EndW'(i) < e_end;
  end

  // The row in flight: its data, strobes, beat count, and the burst being sent
  // (beats [first_q, end_q) of the row, at addr_q).
  logic busy_q, busy_d, aw_done_q, aw_done_d;
  logic [BufBytes*8-1:0] data_q, data_d;
  logic [BufBytes-1:0]   strb_q, strb_d;
  logic [AddrWidth-1:0]  addr_q, addr_d;
  logic [BeatW:0]        beats_q, beats_d, beat_q, beat_d, first_q, first_d, end_q, end_d;
  logic [BeatW:0]        burst_beats;
  logic aw_fire, w_fire, out_full, out_empty, row_done;
  logic [AddrWidth-1:0] out_addr, row_addr;
  logic [$clog2(MaxWrites):0] out_count;
  logic err_q, err_d;
  logic [AddrWidth-1:0] err_addr_q, err_addr_d;

  assign row_addr      = {e_addr[AddrWidth-1:BeatShift], {BeatShift{1'b0}}};

  // The next row is taken in the cycle the current one's last beat goes, so rows follow each other
  // without an idle cycle in between.
  assign row_done    = busy_q && (aw_done_q || aw_fire) && beat_q + (BeatW+1)'(w_fire) == beats_q;
  assign take        = (!busy_q || row_done) && !fifo_empty && !abort_i;
  assign m_awvalid_o = busy_q && !aw_done_q && !out_full;
  assign m_awaddr_o  = addr_q;
  assign burst_beats = end_q - first_q;
  assign m_awlen_o   = 8'(burst_beats) - 8'd1;
  assign m_awsize_o  = 3'(BeatShift);
  assign m_awburst_o = 2'b01;
  assign m_wvalid_o  = busy_q && beat_q != end_q;
  assign m_wdata_o   = data_q[beat_q[BeatW-1:0]*AxiDataWidth +: AxiDataWidth];
  assign m_wstrb_o   = strb_q[beat_q[BeatW-1:0]*BeatBytes +: BeatBytes];
  assign m_wlast_o   = beat_q == end_q - 1'b1;
  assign aw_fire     = m_awvalid_o && m_awready_i;
  assign w_fire      = m_wvalid_o && m_wready_i;

  // For the WR_BYTES counter alone: the strobes of a beat written are registered, counted in
  // groups of 16 into registers in the next cycle, and the groups' counts summed after (the count
  // behind the write handshake was one of the paths that held the clock down, issue #42).
  localparam int unsigned StrbGroups = (BeatBytes + 15) / 16;
  logic [BeatBytes-1:0] strb_fired_q;
  logic [4:0]           group_q [StrbGroups], group_d [StrbGroups];  // strobes set per group of 16
  always_comb begin
    for (int g = 0; g < StrbGroups; g++) begin
      group_d[g] = '0;
      for (int b = g * 16; b < g * 16 + 16 && b < BeatBytes; b++) group_d[g] += 5'(strb_fired_q[b]);
    end
  end
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      strb_fired_q <= '0;
      for (int g = 0; g < StrbGroups; g++) group_q[g] <= '0;
    end else begin
      strb_fired_q <= w_fire ? m_wstrb_o : '0;
      for (int g = 0; g < StrbGroups; g++) group_q[g] <= group_d[g];
    end
  end
  always_comb begin
    wbytes_o = '0;
    for (int g = 0; g < StrbGroups; g++) wbytes_o += ($clog2(BeatBytes)+1)'(group_q[g]);
  end

  always_comb begin
    busy_d    = busy_q;
    aw_done_d = aw_done_q || aw_fire;
    data_d    = data_q;
    strb_d    = strb_q;
    addr_d    = addr_q;
    beats_d   = beats_q;
    first_d   = first_q;
    end_d     = end_q;
    beat_d    = beat_q + (BeatW+1)'(w_fire);
    if (busy_q && aw_done_d && beat_d == end_q) begin
      if (end_q == beats_q) begin
        busy_d = 1'b0;
      end else begin  // the rest of the row, from the next page
        aw_done_d = 1'b0;
        first_d   = end_q;
        end_d     = beats_q;
        addr_d    = addr_q + (AddrWidth'(burst_beats) << BeatShift);
      end
    end
    if (take) begin
      busy_d    = 1'b1;
      aw_done_d = 1'b0;
      data_d    = buf_data;
      strb_d    = buf_strb;
      addr_d    = row_addr;
      beats_d   = nbeats;
      first_d   = '0;
      end_d     = row_first_end;
      beat_d    = '0;
    end
    if (clear_i) busy_d = 1'b0;
  end

  // Addresses of bursts awaiting their write response, for error reports. They are counted beside
  // it, and whether the next AW must wait is registered: behind the FIFO's pointer comparison, AW's
  // handshake and the row's completion made one of the paths that held the clock down (issue #42).
  localparam int unsigned OutW = $clog2(MaxWrites) + 1;
  logic [OutW-1:0] out_n_q, out_n_d;
  logic            out_fifo_full;  // never: out_full keeps AW back first
  assign out_n_d = out_n_q + OutW'(aw_fire) - OutW'(m_bvalid_i);
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      out_n_q  <= '0;
      out_full <= 1'b0;
    end else if (clear_i) begin
      out_n_q  <= '0;
      out_full <= 1'b0;
    end else begin
      out_n_q  <= out_n_d;
      out_full <= out_n_d == OutW'(MaxWrites);
    end
  end
  tsr_fifo #(.Width(AddrWidth), .Depth(MaxWrites)) u_outstanding (
    .clk_i, .rst_ni, .clear_i,
    .push_i (aw_fire),
    .data_i (addr_q),
    .full_o (out_fifo_full),
    .pop_i  (m_bvalid_i),
    .data_o (out_addr),
    .empty_o(out_empty),
    .count_o(out_count)
  );
  assign m_bready_o = 1'b1;

  always_comb begin
    err_d      = err_q;
    err_addr_d = err_addr_q;
    if (m_bvalid_i && m_bresp_i[1] && !err_q) begin
      err_d      = 1'b1;
      err_addr_d = out_addr;
    end
    if (clear_i) err_d = 1'b0;
  end
  assign err_o      = err_q;
  assign err_addr_o = err_addr_q;
  assign idle_o     = fifo_empty && !busy_q && out_empty;
  assign quiet_o    = !busy_q && out_empty;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      busy_q     <= 1'b0;
      aw_done_q  <= 1'b0;
      beat_q     <= '0;
      err_q      <= 1'b0;
      err_addr_q <= '0;
    end else begin
      busy_q     <= busy_d;
      aw_done_q  <= aw_done_d;
      beat_q     <= beat_d;
      err_q      <= err_d;
      err_addr_q <= err_addr_d;
    end
  end
  always_ff @(posedge clk_i) begin
    data_q  <= data_d;
    strb_q  <= strb_d;
    addr_q  <= addr_d;
    beats_q <= beats_d;
    first_q <= first_d;
    end_q   <= end_d;
  end

  logic unused_store;
  assign unused_store = fifo_full ^ ^fifo_count ^ ^out_count ^ m_bresp_i[0] ^ out_fifo_full;
endmodule
