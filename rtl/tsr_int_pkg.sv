// Engine-internal constants (not part of the host interface, so not in the generated tsr_pkg).
package tsr_int_pkg;
  // Destinations of read data, carried in the read request tag.
  localparam logic [2:0] DEST_DESC  = 3'd0;  // descriptor words
  localparam logic [2:0] DEST_A     = 3'd1;  // one A row into its row bank
  localparam logic [2:0] DEST_B     = 3'd2;  // one B row (cols bytes) into the column banks
  localparam logic [2:0] DEST_CIN   = 3'd3;  // one C_in row (cols int32)
  localparam logic [2:0] DEST_BIAS  = 3'd4;  // bias for one column block
  localparam logic [2:0] DEST_MULT  = 3'd5;  // requantization multipliers for one column block
  localparam logic [2:0] DEST_SHIFT = 3'd6;  // requantization shifts for one column block

  // Whether an array supports the FOLD dataflow: it halves into two bands of rows, and one beat
  // carries a B row for both bands' column blocks.
  function automatic bit fold_ok(int unsigned rows, int unsigned cols, int unsigned axi_data_bits);
    fold_ok = rows % 2 == 0 && 2 * cols * 8 <= axi_data_bits;
  endfunction

  // log2 of the bytes of one C element: int8 1, bf16 2, int32 and fp32 4.
  function automatic logic [1:0] out_shift(logic [1:0] out_mode);
    out_shift = (out_mode == tsr_pkg::OUT_INT8) ? 2'd0 : (out_mode == tsr_pkg::OUT_BF16) ? 2'd1 : 2'd2;
  endfunction

  // Beats of one A row of k bytes: ceil(k / beat_bytes).
  function automatic logic [15:0] beats_of(logic [15:0] k, int unsigned beat_bytes);
    beats_of = (k + 16'(beat_bytes - 1)) >> $clog2(beat_bytes);
  endfunction

  // Resident A: a GEMM without C_in (which comes per tile with its A rows) whose row blocks all fit
  // in an A bank (bank_beats beats: both slots), each at a pitch of its row's beats, loads A in its
  // first column block and keeps it for the others. The fit is checked with the row's beats rounded
  // up to a power of two, which needs no multiplier: ceil(M / rows) <= bank_beats >> ceil(log2(beats)).
  // Not with BF16, whose A rows' blocks the scratchpad keeps per slot (tsr_scratch).
  function automatic logic resident_a(logic accumulate, logic bf16, logic [15:0] m, logic [15:0] row_beats,
                                      int unsigned rows, int unsigned bank_beats);
    logic [16:0] blocks, fit;
    blocks = ({1'b0, m} + 17'(rows - 1)) >> $clog2(rows);
    fit    = 17'(bank_beats);
    for (int i = 0; i < 16; i++) if (row_beats > 16'(1 << i)) fit = 17'(bank_beats >> (i + 1));
    resident_a = !accumulate && !bf16 && blocks <= fit;
  endfunction

  // A BF16 tile's A rows take a read beat per cycle of compute, twice int8's, so where they fit in a
  // quarter of a bank (k_max / 2 bytes) the A loader rings through four slots of that size and runs
  // up to two tiles ahead of the array; otherwise A has the two slots of half a bank. C_in keeps
  // two slots: a tile's is its A slot's low bit.
  function automatic logic a_quad(logic bf16, logic [15:0] row_beats, int unsigned k_max, int unsigned beat_bytes);
    a_quad = bf16 && row_beats <= 16'(k_max / 2 / beat_bytes);
  endfunction

  // A slot number as a one-hot vector, written out: Yosys 0.23 lowers a variable bit index (v[i] =
  // ..., or ... = v[i]) through 32-bit index arithmetic, a carry chain on the slot flags' paths.
  function automatic logic [3:0] onehot4(logic [1:0] i);
    onehot4 = {i == 2'd3, i == 2'd2, i == 2'd1, i == 2'd0};
  endfunction
  function automatic logic [1:0] onehot2(logic i);
    onehot2 = {i, !i};
  endfunction

  // The A slot after `slot`: 0, 1, 2, 3, 0 ... with four slots, 0, 1, 0 ... with two.
  function automatic logic [1:0] a_next_slot(logic [1:0] slot, logic quad);
    a_next_slot = quad ? slot + 2'd1 : {1'b0, !slot[0]};
  endfunction

  // Width of a read request's tag: destination, slot (two bits: A's four), index (clog2(k_max) bits: the row, or for A
  // the row and the beat in its bank where the row starts), byte lane of the segment in its beat,
  // and whether the request completes the slot. tsr_loader packs it,
  // tsr_scratch unpacks it.
  function automatic int unsigned rd_tag_bits(int unsigned k_max, int unsigned axi_data_bits);
    rd_tag_bits = 3 + 2 + $clog2(k_max) + $clog2(axi_data_bits / 8) + 1;
  endfunction
endpackage
