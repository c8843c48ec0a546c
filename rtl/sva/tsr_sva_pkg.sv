// Simulation only. The platform implements tsr_assertion_failed: it keeps the first failing
// assertion's hierarchical name (Verilator prints it too) and fails the run with it.
package tsr_sva_pkg;
  import "DPI-C" function void tsr_assertion_failed(input string name);
endpackage
