sva/tsr_sva_pkg.sv
sva/tsr_fifo_sva.sv
sva/tsr_seq_sva.sv
sva/tsr_axi_rd_sva.sv
sva/tsr_top_sva.sv
sva/tsr_ctrl_sva.sv
sva/tsr_bind.sv
