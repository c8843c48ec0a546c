#!/usr/bin/python3
"""Unit tests of the regression's judging parts (scripts/regression): reading Catch2's XML reports
(real ones, from Catch2 2.13, in catch2/), the JSON of replays and workloads, the baseline
comparison, coverage points, the testplan and the reports."""
import pathlib
import sys
import tempfile
import types
import unittest
import xml.etree.ElementTree as ET

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent / "scripts"))
from regression import baselines, coverage, presets, report, results  # noqa: E402
from regression.jobs import Job  # noqa: E402


def catch2(name):
    return (HERE / "catch2" / f"{name}.xml").read_text()


def cosim_job(status, output="", kind="directed"):
    return Job("cosim: a test", kind, "small", ["tessera_cosim_tests", "cosim: a test"], status=status, output=output)


class Catch2Results(unittest.TestCase):
    def test_pass_takes_the_seed_from_the_captured_stdout(self):
        job = cosim_job("pass")
        results.parse(job, catch2("passes"))
        self.assertEqual((job.status, job.seed, job.detail), ("pass", 42, ""))

    def test_the_scoreboard_message_in_scope_names_the_failure(self):
        job = cosim_job("fail")
        results.parse(job, catch2("info_then_check"))
        self.assertEqual(job.detail, "scoreboard: descriptor 3, write to 0x1000: expected 0x01, got 0x02")
        self.assertEqual(job.seed, 7)

    def test_a_fail_message(self):
        job = cosim_job("fail")
        results.parse(job, catch2("fail_message"))
        self.assertEqual(job.detail, "scoreboard: unexpected write of 0x10 to 0x2000")

    def test_an_exception_such_as_a_failed_rtl_assertion(self):
        job = cosim_job("fail")
        results.parse(job, catch2("throws"))
        self.assertEqual(job.detail, "RTL assertion tsr_fifo_sva.no_push_when_full failed by cycle 123")

    def test_an_assertion_with_its_values(self):
        job = cosim_job("fail")
        results.parse(job, catch2("require"))
        self.assertEqual(job.detail, "REQUIRE( a == 4 ) with 3 == 4")

    def test_a_report_cut_short_falls_back_to_the_output(self):
        job = cosim_job("fail", output="tessera-sim: lost the simulator (signal 11)\n")
        results.parse(job, catch2("throws")[:200])
        self.assertEqual(job.detail, "tessera-sim: lost the simulator (signal 11)")

    def test_no_report_at_all(self):
        job = cosim_job("fail")
        results.parse(job, None)
        self.assertEqual(job.detail, "failed with no output")

    def test_a_timeout_keeps_its_reason(self):
        job = cosim_job("fail")
        job.detail = "no result within 900 s"
        results.parse(job, "")
        self.assertEqual(job.detail, "no result within 900 s")


class CommandResults(unittest.TestCase):
    def test_replay_cycles_and_mismatch(self):
        job = Job("replay: t", "replay", "small", [], status="fail",
                  output='starting\n{"result": "fail", "cycles": {"replayed": 1234}, "first_mismatch": "C[0,1]"}\n')
        results.parse(job)
        self.assertEqual((job.metrics["cycles"], job.detail), (1234, "C[0,1]"))

    def test_perf_that_is_not_bit_exact_fails_even_with_exit_0(self):
        job = Job("perf: w", "perf", "small", [], status="pass",
                  output='{"cycles": 99, "bit_exact": false, "mismatch": "C[3,4]", "scoreboard": {"detail": "d"}}')
        results.parse(job)
        self.assertEqual((job.status, job.metrics["cycles"], job.detail), ("fail", 99, "C[3,4] d"))

    def test_output_without_json_is_a_failure(self):
        job = Job("perf: w", "perf", "small", [], status="pass", output="Segmentation fault")
        results.parse(job)
        self.assertEqual((job.status, job.detail), ("fail", "Segmentation fault"))


def measured(kind, preset, name, status="pass", **metrics):
    return Job(name, kind, preset, [], status=status, metrics=metrics)


class Baselines(unittest.TestCase):
    CYCLES = {"small": {"perf: a": 1000, "replay: b": 2000}}
    AREA = {"small": {"luts": 100, "ffs": 50, "dsps": 0, "brams": 4, "latches": 0}}

    def compare(self, jobs):
        deltas, ok = baselines.compare(jobs, self.CYCLES, self.AREA, 2.0, 2.0)
        return {(d.what, d.item): d for d in deltas}, ok

    def test_within_tolerance_better_and_new(self):
        d, ok = self.compare([measured("perf", "small", "perf: a", cycles=1020),
                              measured("replay", "small", "replay: b", cycles=1900),
                              measured("perf", "small", "perf: new", cycles=5)])
        self.assertTrue(ok)
        self.assertEqual(d["cycles", "perf: a"].verdict, "ok")
        self.assertAlmostEqual(d["cycles", "perf: a"].percent, 2.0)
        self.assertEqual(d["cycles", "replay: b"].verdict, "better")
        self.assertEqual((d["cycles", "perf: new"].verdict, d["cycles", "perf: new"].baseline), ("new", None))

    def test_growth_past_tolerance_fails(self):
        d, ok = self.compare([measured("perf", "small", "perf: a", cycles=1021)])
        self.assertFalse(ok)
        self.assertEqual(d["cycles", "perf: a"].verdict, "FAIL")

    def test_area_tolerance_and_no_latch_at_all(self):
        d, ok = self.compare([measured("synth", "small", "synth", luts=102, ffs=49, dsps=0, brams=4, latches=0)])
        self.assertTrue(ok)
        self.assertEqual([d[k, "synth"].verdict for k in ("luts", "ffs", "dsps", "latches")], ["ok", "better", "ok", "ok"])
        d, ok = self.compare([measured("synth", "small", "synth", luts=100, dsps=1, latches=1)])
        self.assertFalse(ok)
        self.assertEqual((d["dsps", "synth"].verdict, d["latches", "synth"].verdict), ("FAIL", "FAIL"))

    def test_fmax_may_fall_by_its_tolerance_and_no_more(self):
        base = {"small": {"fmax_mhz": 400.0}}
        timing = {"fmax_mhz": 392.0, "logic_fmax_mhz": 392.0, "arrival_ps": 2551, "limited_by": "logic path"}
        deltas, ok = baselines.compare([measured("synth", "small", "synth", timing=timing)], {}, {}, 2.0, 2.0, base, 2.0)
        self.assertTrue(ok)
        self.assertEqual([(d.what, d.verdict) for d in deltas], [("fmax_mhz", "ok")])
        self.assertAlmostEqual(deltas[0].percent, -2.0)
        slower = {**timing, "fmax_mhz": 391.9}
        deltas, ok = baselines.compare([measured("synth", "small", "synth", timing=slower)], {}, {}, 2.0, 2.0, base, 2.0)
        self.assertFalse(ok)
        self.assertEqual(deltas[0].verdict, "FAIL")
        faster = {**timing, "fmax_mhz": 410.0}
        deltas, ok = baselines.compare([measured("synth", "default", "synth", timing=faster),
                                        measured("synth", "small", "synth", timing=faster)], {}, {}, 2.0, 2.0, base, 2.0)
        self.assertTrue(ok)
        self.assertEqual([d.verdict for d in deltas], ["new", "better"])
        # rtl/fmax.json takes the passing estimates, in the fields scripts/synth writes.
        fmax = baselines.updated_fmax([measured("synth", "default", "synth", timing={**timing, "path": ["x"]}),
                                       measured("synth", "small", "synth", status="fail", timing=faster)], base)
        self.assertEqual(fmax, {"small": {"fmax_mhz": 400.0}, "default": timing})

    def test_update_takes_only_passing_figures_and_leaves_the_input_alone(self):
        cycles, area = baselines.updated([measured("perf", "small", "perf: a", cycles=900),
                                          measured("perf", "small", "replay: b", status="fail", cycles=1),
                                          measured("synth", "default", "synth", luts=7, latches=0, seconds=3)],
                                         self.CYCLES, self.AREA)
        self.assertEqual(cycles["small"], {"perf: a": 900, "replay: b": 2000})
        self.assertEqual(area["default"], {"luts": 7, "latches": 0})
        self.assertEqual(self.CYCLES["small"]["perf: a"], 1000)

    def test_a_missing_or_broken_baseline_file_is_empty(self):
        with tempfile.TemporaryDirectory() as d:
            bad = pathlib.Path(d) / "bad.json"
            bad.write_text("{")
            self.assertEqual((baselines.load(bad), baselines.load(pathlib.Path(d) / "none.json")), ({}, {}))


def dat_line(page, name, hier, count):
    keys = {"page": page, "o": name, "h": hier}
    return "C '" + "\x01".join(f"{k}\x02{v}" for k, v in keys.items()) + f"' {count}"


class Coverage(unittest.TestCase):
    DAT = "\n".join(["# SystemC::Coverage-3",
                     dat_line("v_line/tsr_fifo__W8", "", "top.u_fifo", 3),
                     dat_line("v_line/tsr_fifo__W16", "", "top.u_fifo2", 0),
                     dat_line("v_toggle/tsr_pe", "", "top.pe", 1),
                     dat_line("v_user/tsr_top_sva", "cov_ring_wrap", "top.sva", 2),
                     dat_line("v_user/tsr_top_sva", "cov_ring_wrap", "top.sva2", 1),
                     dat_line("v_user/tsr_top_sva", "cov_fault", "top.sva", 0)])

    def test_points_per_module_without_parameter_suffixes(self):
        modules, user = coverage.summarize(coverage.parse_points(self.DAT))
        self.assertEqual(modules["tsr_fifo"]["line"], [1, 2])
        self.assertEqual(modules["tsr_pe"]["toggle"], [1, 1])
        self.assertEqual(user, {"cov_ring_wrap": 3, "cov_fault": 0})

    PLAN = """
[[testpoint]]
name = "ring"
description = "the ring wraps"
tests = ["cosim: a test"]
covers = ["cov_ring_wrap"]
[[testpoint]]
name = "faults"
description = "faults"
tests = ["cosim: a test"]
covers = ["cov_fault"]
[[testpoint]]
name = "missing"
description = "a test that did not run"
tests = ["cosim: other"]
covers = []
"""

    def test_testplan_statuses(self):
        cov = {"user": {"cov_ring_wrap": 3, "cov_fault": 0}}
        rows = {r["name"]: r for r in coverage.testplan(self.PLAN, [cosim_job("pass")], cov)}
        self.assertEqual([rows[n]["status"] for n in ("ring", "faults", "missing")], ["pass", "fail", "not run"])
        self.assertEqual(rows["faults"]["unhit"], ["cov_fault"])
        # Without a coverage run the tests alone decide.
        rows = {r["name"]: r for r in coverage.testplan(self.PLAN, [cosim_job("fail")], None)}
        self.assertEqual([rows[n]["status"] for n in ("ring", "faults")], ["fail", "fail"])


class Reports(unittest.TestCase):
    RUN = types.SimpleNamespace(mode="quick", presets=["small"], seed_list=[5], cycle_tolerance=2.0,
                                area_tolerance=2.0, fmax_tolerance=2.0, out=pathlib.Path("out"))

    def failed_job(self):
        job = cosim_job("fail", output="log")
        job.detail, job.repro, job.waveform = "scoreboard: write to 0x10: expected 0x1, got 0x2", "cmd 'x y'", "w.fst"
        return job

    def test_markdown_and_html(self):
        jobs = [self.failed_job(), measured("perf", "small", "perf: a", cycles=1)]
        deltas, ok = baselines.compare(jobs, {}, {}, 2.0, 2.0)
        md = report.markdown(self.RUN, jobs, deltas, ok, None, [], "FAIL")
        self.assertIn("Result: **FAIL**", md)
        self.assertIn("| cycles | small | perf: a | - | 1 | - | new |", md)
        html = report.markdown_to_html(md)
        self.assertIn("<h1>Regression report (quick)</h1>", html)
        self.assertIn("<td>perf: a</td>", html)
        self.assertIn("<li>reproduce: <code>cmd 'x y'</code></li>", html)  # nested under its failure
        self.assertIn("<strong>FAIL</strong>", html)

    def test_cover_points_by_module(self):
        cov = {"files": 2, "info": "c.info", "modules": {"tsr_epilogue": {"user": [1, 2]}},
               "user": {"cov_rq_left": 4, "cov_ring_wrap": 0},
               "user_module": {"cov_rq_left": "tsr_epilogue", "cov_ring_wrap": "tsr_top_sva"}}
        md = report.markdown(self.RUN, [], [], True, cov, [], "PASS")
        self.assertIn("| tsr_epilogue | - | - | 1/2 (50.0%) |", md)
        self.assertLess(md.index("| tsr_epilogue | cov_rq_left | 4 |"), md.index("| tsr_top_sva | cov_ring_wrap | 0 |"))

    def test_junit(self):
        with tempfile.TemporaryDirectory() as d:
            path = pathlib.Path(d) / "junit.xml"
            report.write_junit(path, [self.failed_job(), measured("perf", "small", "perf: a", cycles=1)])
            suites = ET.parse(path).getroot()
            self.assertEqual([(s.get("name"), s.get("tests"), s.get("failures")) for s in suites],
                             [("directed", "1", "1"), ("perf", "1", "0")])
            failure = suites.find("testsuite/testcase/failure")
            self.assertTrue(failure.get("message").startswith("scoreboard: write to 0x10"))
            self.assertIn("reproduce: cmd 'x y'", failure.text)

    def test_summary_lists_failures_and_moved_figures(self):
        jobs = [self.failed_job(), measured("perf", "small", "perf: a", cycles=1)]
        deltas, _ = baselines.compare(jobs, {}, {}, 2.0, 2.0)
        text = report.summary(self.RUN, jobs, 12.0, deltas, None, [], "FAIL", None)
        self.assertIn("1 of 2 passed in 12 s", text)
        self.assertIn("FAIL directed/small/cosim: a test\n     scoreboard: write to 0x10", text)
        self.assertIn("perf: a", text)
        self.assertTrue(text.endswith("regression: FAIL"))


class Presets(unittest.TestCase):
    def test_each_preset_has_its_twin(self):
        self.assertEqual((presets.twin("small"), presets.twin("large-bf16")), ("small-bf16", "large"))
        self.assertTrue(all(presets.twin(p) in presets.PRESETS and presets.has_bf16(p) != presets.has_bf16(presets.twin(p))
                            for p in presets.PRESETS))
        self.assertEqual([p for p in presets.PRESETS if presets.has_bf16(p)], ["small-bf16", "default-bf16", "large-bf16"])
        self.assertTrue(presets.has_bf16(presets.QUICK_PRESET))  # the quick regression reaches both datapaths

    def test_traces_with_bf16_gemms(self):
        traces = HERE.parent / "traces"
        self.assertTrue(presets.trace_uses_bf16(traces / "tiny_layer_bf16"))
        self.assertTrue(presets.trace_uses_bf16(traces / "edge_bf16_specials"))
        self.assertFalse(presets.trace_uses_bf16(traces / "tiny_layer"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
