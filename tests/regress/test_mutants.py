#!/usr/bin/python3
"""Unit tests of scripts/mutate's parts that need no simulator: which mutants a piece of RTL has
(scripts/regression/mutants.py), how a failed build and a run are judged, the sample and the score
(scripts/regression/mutation.py)."""
import pathlib
import sys
import unittest

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from regression import mutants, mutation  # noqa: E402
from regression.presets import QUICK_PRESET  # noqa: E402

MODULE = """\
module m #(
  parameter int unsigned Rows = 16
) (
  input  logic        clk_i,
  input  logic        rst_ni,
  input  logic [7:0]  a_i,
  output logic [7:0]  q_o
);
  logic [7:0] q_q, sum;
  logic       v_en;
  assign sum  = a_i + q_q - 8'd1;   // a comment with < and &&
  assign v_en = a_i <= q_q && a_i != '0;
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) q_q <= '0;
    else if (a_i > 8'(Rows)) q_q <= sum;
  end
  for (genvar j = 0; j < 2; j++) begin : g_x
    logic [3:0] w;
    assign w = {2{a_i[j*4 +: 2]}};
  end
`ifndef SYNTHESIS
  always_ff @(posedge clk_i) if (q_q < 8'd3) $display("x");
`endif
  assign q_o = q_q[7:0];
endmodule
"""


def changes(text=MODULE):
    out = set()
    for m in mutants.mutants_of("m.sv", text):
        before, after = m.lines(text)
        out.add((m.operator, before.strip(), after.strip()))
    return out


class Mutants(unittest.TestCase):
    def setUp(self):
        self.changes = changes()
        self.after = {a for _, _, a in self.changes}

    def test_comparisons_are_swapped_and_nonblocking_assignments_are_not(self):
        self.assertIn("assign v_en = a_i < q_q && a_i != '0;", self.after)
        self.assertIn("assign v_en = a_i > q_q && a_i != '0;", self.after)
        self.assertIn("else if (a_i >= 8'(Rows)) q_q <= sum;", self.after)
        self.assertFalse(any("q_q < sum" in a or "q_q > sum" in a for a in self.after))

    def test_equality_logical_and_dropped_terms(self):
        self.assertIn("assign v_en = a_i <= q_q && a_i == '0;", self.after)
        self.assertIn("assign v_en = a_i <= q_q || a_i != '0;", self.after)
        self.assertIn("assign sum  = a_i + q_q ;   // a comment with < and &&", self.after)
        self.assertIn("assign sum  = a_i  - 8'd1;   // a comment with < and &&", self.after)
        # `&&` binds looser than the != after it: the whole comparison goes
        self.assertIn("assign v_en = a_i <= q_q ;", self.after)
        self.assertNotIn("assign v_en = a_i <= q_q != '0;", self.after)

    def test_literals_and_bounds_one_up_and_one_down(self):
        self.assertIn("assign sum  = a_i + q_q - 8'd2;   // a comment with < and &&", self.after)
        self.assertIn("assign sum  = a_i + q_q - 8'd0;   // a comment with < and &&", self.after)
        self.assertIn("assign v_en = a_i <= q_q && a_i != '1;", self.after)
        self.assertIn("for (genvar j = 0; j < 3; j++) begin : g_x", self.after)
        self.assertIn("else if (a_i > 8'((Rows + 1))) q_q <= sum;", self.after)  # a bound, in its cast
        self.assertIn("else if (a_i > 8'((Rows - 1))) q_q <= sum;", self.after)

    def test_conditions_inverted_and_stuck_enables(self):
        self.assertIn("else if (!(a_i > 8'(Rows))) q_q <= sum;", self.after)
        self.assertIn("else if (1'b0) q_q <= sum;", self.after)
        self.assertIn("assign v_en = '1;", self.after)
        self.assertIn("assign v_en = '0;", self.after)

    def test_declarations_widths_casts_replications_sim_code_and_the_reset_are_left_alone(self):
        touched = {b for _, b, _ in self.changes}
        for line in ("parameter int unsigned Rows = 16", "input  logic [7:0]  a_i,", "logic [7:0] q_q, sum;",
                     "logic [3:0] w;", "assign q_o = q_q[7:0];",
                     "always_ff @(posedge clk_i) if (q_q < 8'd3) $display(\"x\");"):
            self.assertNotIn(line, touched)
        self.assertFalse(any("9'(" in a or "7'(" in a for a in self.after))  # a cast's width stays
        self.assertNotIn("if (!(!rst_ni)) q_q <= '0;", self.after)
        self.assertNotIn("if (1'b0) q_q <= '0;", self.after)
        self.assertIn("if (!rst_ni) q_q <= '1;", self.after)  # the value a reset gives is mutated
        self.assertFalse(any("{3{" in a or "{1{" in a or "+: 3" in a or "+: 1" in a for a in self.after))
        self.assertFalse(any("$display" in a for a in self.after))

    def test_every_mutant_applies_to_its_own_place_and_keys_are_unique(self):
        ms = mutants.mutants_of("m.sv", MODULE)
        self.assertEqual(len({m.key for m in ms}), len(ms))
        for m in ms:
            self.assertNotEqual(m.apply(MODULE), MODULE)
            self.assertEqual(m.module, "m")

    def test_the_rtl_has_mutants_in_every_module_and_only_the_generated_files_are_left_out(self):
        rtl = ROOT / "rtl"
        files = mutants.rtl_files(rtl)
        self.assertNotIn("tsr_pkg.sv", files)
        self.assertNotIn("tsr_gemm_cfg.sv", files)
        ms = mutants.all_mutants(rtl)
        self.assertEqual({m.file for m in ms}, set(files))
        for m in ms:
            self.assertEqual((rtl / m.file).read_text()[m.start:m.end], m.original)


class Judging(unittest.TestCase):
    def test_a_lint_warning_is_a_kill_and_an_error_is_invalid(self):
        lint = "%Warning-WIDTHEXPAND: /x/rtl/tsr_seq.sv:10:5: Operator ASSIGN expects 8 bits\n%Error: Exiting due to 1 warning(s)\n"
        self.assertEqual(mutation.build_verdict(lint)[0], "lint")
        bad = "%Error: /x/rtl/tsr_seq.sv:10:5: syntax error, unexpected ')'\n%Error: Exiting due to 1 error(s)\n"
        self.assertEqual(mutation.build_verdict(bad), ("invalid", "%Error: /x/rtl/tsr_seq.sv:10:5: syntax error, unexpected ')'"))

    def test_the_sample_depends_on_the_seed_alone(self):
        ms = mutants.all_mutants(ROOT / "rtl")
        a = [m.key for m in mutation.sample(ms, 20, 7)]
        self.assertEqual(a, [m.key for m in mutation.sample(list(reversed(ms)), 20, 7)])
        self.assertNotEqual(a, [m.key for m in mutation.sample(ms, 20, 8)])
        self.assertTrue(all(m.module == "tsr_pe" for m in mutation.sample(ms, 5, 1, modules={"tsr_pe"})))

    def test_the_score_leaves_out_equivalent_and_invalid_mutants(self):
        def r(module, outcome):
            return mutation.Result("k", module, "f.sv", 1, "drop", "", "", outcome=outcome)
        per = mutation.score([r("a", "killed"), r("a", "lint"), r("a", "survived"), r("a", "equivalent"),
                              r("b", "invalid"), r("b", "timeout")])
        self.assertAlmostEqual(per["a"]["score"], 2 / 3)
        self.assertEqual(per["b"]["score"], 1.0)
        self.assertAlmostEqual(per["all"]["score"], 3 / 4)

    def test_a_cast_width_is_left_alone_unless_its_whole_term_is_dropped(self):
        text = "module c;\n  assign q = a - (W+1)'(b);\n  assign r = x > (W+2)'(Cols);\nendmodule\n"
        afters = {m.lines(text)[1].strip() for m in mutants.mutants_of("c.sv", text)}
        self.assertIn("assign q = a ;", afters)
        self.assertIn("assign r = x > (W+2)'((Cols + 1));", afters)
        self.assertFalse([a for a in afters if "(W+1)'" not in a and "(W+2)'" not in a and "a ;" not in a])

    def test_every_reviewed_equivalent_is_a_mutant_of_the_rtl_as_it_is(self):
        # A key stops matching when its line changes: the mutant must then be reviewed again.
        by_key = {m.key: m for m in mutants.all_mutants(ROOT / "rtl")}
        texts = {}
        for key, e in mutation.load_equivalent().items():
            with self.subTest(key=key):
                self.assertIn(key, by_key, f"{key} ({e.get('module')}: {e.get('after')}) is no longer a mutant of "
                                           f"the RTL: review the line again and update tests/mutation/equivalent.toml")
                m = by_key[key]
                text = texts.setdefault(m.file, (ROOT / "rtl" / m.file).read_text())
                before, after = m.lines(text)
                self.assertEqual((e["module"], e["before"], e["after"]), (m.module, before.strip(), after.strip()))
                self.assertTrue(e["reason"])
                self.assertIn(e.get("scope", QUICK_PRESET), (QUICK_PRESET,))

    def test_the_regression_stops_at_the_catch(self):
        script = "import time\nprint('[1/9] PASS a', flush=True)\nprint('[2/9] FAIL b', flush=True)\n" \
                 "print('  write to 0x10: expected 0x01, got 0x02', flush=True)\ntime.sleep(60)\n"
        stop = lambda line, previous: mutation.PROGRESS_FAIL.match(previous) and line  # noqa: E731
        caught, named, out = mutation.regression([sys.executable, "-c", script], stop, timeout=30)
        self.assertTrue(caught)
        self.assertIn("expected 0x01", named)

    def test_a_regression_out_of_time_is_no_verdict(self):
        caught, _, _ = mutation.regression([sys.executable, "-c", "import time; time.sleep(30)"],
                                           lambda line, previous: False, timeout=1)
        self.assertIsNone(caught)


if __name__ == "__main__":
    unittest.main(verbosity=2)
