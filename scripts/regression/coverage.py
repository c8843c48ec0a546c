"""Verilator coverage merged across the simulator runs, and mapped onto rtl/testplan.toml."""
import re
import subprocess
import tomllib

POINT = re.compile(r"C '(.*)' (\d+)$")


def parse_points(dat_text):
    """Per coverage point: (type, module, name, hierarchy, count). Verilator's .dat keys are
    separated by \\x01 (between pairs) and \\x02 (key from value)."""
    points = []
    for line in dat_text.splitlines():
        m = POINT.match(line)
        if not m:
            continue
        kv = dict(item.split("\x02", 1) for item in m.group(1).split("\x01") if "\x02" in item)
        page = kv.get("page", "")
        kind = page.split("/")[0].removeprefix("v_")
        module = page.split("/")[1].split("__")[0] if "/" in page else "?"  # without parameter suffixes
        points.append((kind, module, kv.get("o", ""), kv.get("h", ""), int(m.group(2))))
    return points


def summarize(points):
    """Per module and type [points hit, points], and each user cover point's hits summed over instances."""
    modules, user = {}, {}
    for kind, module, name, _, count in points:
        s = modules.setdefault(module, {}).setdefault(kind, [0, 0])
        s[0] += count > 0
        s[1] += 1
        if kind == "user":
            user[name] = user.get(name, 0) + count
    return modules, user


def merge(raw_dir, out_dir):
    """Merges the runs' .dat files (and writes lcov); None when there were none."""
    raw = sorted(raw_dir.glob("*.dat"))
    if not raw:
        return None
    merged, info = out_dir / "merged.dat", out_dir / "coverage.info"
    subprocess.run(["verilator_coverage", "--write", str(merged), *map(str, raw)], check=True, capture_output=True)
    subprocess.run(["verilator_coverage", "--write-info", str(info), str(merged)], check=True, capture_output=True)
    points = parse_points(merged.read_text(errors="replace"))
    modules, user = summarize(points)
    # Where each cover point is: the RTL module, or the checker bound into one (tsr_ctrl_sva).
    where = {name: module for kind, module, name, _, _ in points if kind == "user"}
    return {"files": len(raw), "merged": str(merged), "info": str(info), "modules": modules, "user": user,
            "user_module": where}


def testplan(plan_toml, jobs, cov):
    """Each testpoint's status: fail when one of its tests failed or, with coverage, one of its cover
    points was never hit; not run when a test of it did not run; else pass."""
    plan = tomllib.loads(plan_toml)["testpoint"]
    by_name = {}
    for j in jobs:
        by_name.setdefault(j.name, []).append(j)
    rows = []
    for tp in plan:
        missing = [t for t in tp["tests"] if t not in by_name]
        failed = [t for t in tp["tests"] if any(j.status != "pass" for j in by_name.get(t, []))]
        hits = {c: (cov or {}).get("user", {}).get(c) for c in tp["covers"]}
        unhit = [c for c, n in hits.items() if not n] if cov else []  # no coverage run: tests alone
        status = "fail" if failed or unhit else ("not run" if missing else "pass")
        rows.append({"name": tp["name"], "description": tp["description"], "tests": tp["tests"],
                     "covers": hits, "missing": missing, "failed": failed, "unhit": unhit, "status": status})
    return rows
