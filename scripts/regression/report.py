"""The regression's reports: JUnit XML, report.md and its HTML, and the summary on stdout."""
import xml.etree.ElementTree as ET

import markdown as md_lib

from .jobs import KINDS

HTML_HEAD = ("<!doctype html><meta charset=utf-8><title>Tessera regression</title>\n"
             "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
             "td,th{border:1px solid #999;padding:2px 6px;font-size:90%}code{background:#eee}</style>\n")


def write_junit(path, jobs):
    suites = ET.Element("testsuites", name="tessera-regress")
    for kind in KINDS:
        group = [j for j in jobs if j.kind == kind]
        if not group:
            continue
        suite = ET.SubElement(suites, "testsuite", name=kind, tests=str(len(group)),
                              failures=str(sum(j.status != "pass" for j in group)),
                              time=f"{sum(j.seconds for j in group):.3f}")
        for j in group:
            case = ET.SubElement(suite, "testcase", classname=f"{kind}.{j.preset or 'all'}", name=j.id,
                                 time=f"{j.seconds:.3f}")
            if j.status != "pass":
                f = ET.SubElement(case, "failure", message=j.detail[:500] or "failed")
                f.text = f"{j.detail}\n\nreproduce: {j.repro}\nwaveform: {j.waveform or '-'}\n\n{j.output[-4000:]}"
            ET.SubElement(case, "system-out").text = j.output[-2000:]
    ET.indent(suites)
    ET.ElementTree(suites).write(path, encoding="unicode", xml_declaration=True)


def fmt_delta(d):
    return "-" if d is None else f"{d:+.2f}%"


def markdown(run, jobs, deltas, deltas_ok, cov, plan, verdict):
    """report.md. `run` has the mode, presets, seed list and tolerances."""
    lines = [f"# Regression report ({run.mode})", "",
             f"Result: **{verdict}**. Presets: {', '.join(run.presets)}; seeds: "
             f"{', '.join(map(str, run.seed_list)) or '-'}.", ""]
    failed = [j for j in jobs if j.status != "pass"]
    lines += ["## Failures", ""] + ([f"- `{j.id}`: {j.detail}\n    - reproduce: `{j.repro}`" +
                                     (f"\n    - waveform: `{j.waveform}`" if j.waveform else "") for j in failed]
                                    or ["None."]) + [""]
    lines += ["## Results", "", "| kind | preset | test | result | seconds |", "|---|---|---|---|---|"]
    lines += [f"| {j.kind} | {j.preset or '-'} | {j.name}{f' (seed {j.seed})' if j.seed is not None else ''} | "
              f"{j.status} | {j.seconds:.1f} |" for j in jobs] + [""]
    lines += ["## Performance, area and Fmax against the baselines", "",
              f"Cycle tolerance {run.cycle_tolerance}%, area tolerance {run.area_tolerance}%, "
              f"Fmax tolerance {run.fmax_tolerance}% "
              f"({'within' if deltas_ok else 'OUTSIDE'} budget).", "",
              "| what | preset | item | baseline | now | delta | verdict |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {d.what} | {d.preset} | {d.item} | {d.baseline if d.baseline is not None else '-'} | {d.now} | "
              f"{fmt_delta(d.percent)} | {d.verdict} |" for d in deltas] + [""]
    if cov:
        lines += ["## Coverage", "", f"{cov['files']} simulator runs merged; lcov: `{cov['info']}`.", "",
                  "| module | line | toggle | user |", "|---|---|---|---|"]
        for module, kinds in sorted(cov["modules"].items()):
            cells = [f"{kinds[k][0]}/{kinds[k][1]} ({100 * kinds[k][0] / kinds[k][1]:.1f}%)" if k in kinds else "-"
                     for k in ("line", "toggle", "user")]
            lines.append(f"| {module} | " + " | ".join(cells) + " |")
        where = cov.get("user_module", {})
        lines += ["", "| module | cover point | hits |", "|---|---|---|"]
        lines += [f"| {where.get(n, '?')} | {n} | {c} |"
                  for n, c in sorted(cov["user"].items(), key=lambda nc: (where.get(nc[0], ""), nc[0]))] + [""]
    lines += ["## Testplan", "", "| testpoint | status | tests | cover points | notes |", "|---|---|---|---|---|"]
    for tp in plan:
        notes = "; ".join(filter(None, [
            f"not run: {', '.join(tp['missing'])}" if tp["missing"] else "",
            f"failed: {', '.join(tp['failed'])}" if tp["failed"] else "",
            f"not hit: {', '.join(tp['unhit'])}" if tp["unhit"] and cov else ""]))
        covers = ", ".join(f"{c} ({n or 0})" for c, n in tp["covers"].items()) or "-"
        lines.append(f"| {tp['name']} | {tp['status']} | {len(tp['tests'])} | {covers} | {notes or '-'} |")
    return "\n".join(lines) + "\n"


def markdown_to_html(text):
    return HTML_HEAD + md_lib.markdown(text, extensions=["tables"], output_format="html") + "\n"


def summary(run, jobs, seconds, deltas, cov, plan, verdict, junit):
    """The summary printed at the end of a run."""
    failed = [j for j in jobs if j.status != "pass"]
    out = [f"\n== regression {run.mode}: {len(jobs) - len(failed)} of {len(jobs)} passed in {seconds:.0f} s"]
    for j in failed:
        out.append(f"FAIL {j.id}\n     {j.detail[:600]}\n     reproduce: {j.repro}"
                   + (f"\n     waveform:  {j.waveform}" if j.waveform else ""))
    moved = [d for d in deltas if d.verdict != "ok"]
    if moved:
        out.append(f"\n== performance, area and Fmax against the baselines (tolerance {run.cycle_tolerance}% cycles, "
                   f"{run.area_tolerance}% area, {run.fmax_tolerance}% Fmax)")
        out.append(f"{'what':8} {'preset':8} {'item':34} {'baseline':>10} {'now':>10} {'delta':>9}  verdict")
        for d in moved:
            base = d.baseline if d.baseline is not None else "-"
            out.append(f"{d.what:8} {d.preset:8} {d.item[:34]:34} {base:>10} {d.now:>10} "
                       f"{fmt_delta(d.percent):>9}  {d.verdict}")
    else:
        out.append(f"performance, area and Fmax: {len(deltas)} figures within the baselines")
    if cov:
        user_hit = sum(1 for c in cov["user"].values() if c)
        out.append(f"coverage: {cov['files']} runs merged, {user_hit} of {len(cov['user'])} cover points hit; "
                   f"lcov {cov['info']}")
    tp_pass = sum(tp["status"] == "pass" for tp in plan)
    out.append(f"testplan: {tp_pass} of {len(plan)} testpoints pass"
               + "".join(f"\n  {tp['name']}: {tp['status']}"
                         + (f" (not hit: {', '.join(tp['unhit'])})" if tp['unhit'] and cov else "")
                         + (f" (failed: {', '.join(tp['failed'])})" if tp['failed'] else "")
                         for tp in plan if tp["status"] != "pass"))
    out.append(f"report: {run.out / 'report.md'} and report.html" + (f"; JUnit: {junit}" if junit else ""))
    out.append(f"regression: {verdict}")
    return "\n".join(out)
