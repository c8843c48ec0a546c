"""Cycles and area held to the checked-in baselines (tests/baselines), and the estimated Fmax to
rtl/fmax.json (the clock the runtime's reports use)."""
import copy
import dataclasses
import json

AREA_KEYS = ["luts", "ffs", "dsps", "brams"]
LIMITED = AREA_KEYS + ["latches"]
FMAX_KEYS = ["fmax_mhz", "logic_fmax_mhz", "arrival_ps", "limited_by"]


@dataclasses.dataclass
class Delta:
    what: str          # cycles, an area key, or fmax_mhz
    preset: str
    item: str          # the workload or replay, or "synth"
    baseline: float | None
    now: float
    percent: float | None
    verdict: str       # new | ok | better | FAIL


def load(path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def compare(jobs, cycles_base, area_base, cycle_tolerance, area_tolerance, fmax_base=None, fmax_tolerance=2.0):
    """The deltas of this run's cycles, area and Fmax against the baselines, and whether all are
    within budget: cycles may grow by cycle_tolerance percent, resources by area_tolerance, latches
    not at all, and the estimated Fmax may fall by fmax_tolerance percent."""
    deltas = []
    for j in jobs:
        if j.kind in ("replay", "perf") and "cycles" in j.metrics:
            base = cycles_base.get(j.preset, {}).get(j.name)
            now = j.metrics["cycles"]
            verdict, pct = "new", None
            if base:
                pct = 100.0 * (now - base) / base
                verdict = "FAIL" if pct > cycle_tolerance else ("better" if pct < 0 else "ok")
            deltas.append(Delta("cycles", j.preset, j.name, base, now, pct, verdict))
        if j.kind == "synth" and j.metrics:
            for key in LIMITED:
                if key not in j.metrics:
                    continue
                base = area_base.get(j.preset, {}).get(key)
                now = j.metrics[key]
                verdict, pct = "new", None
                if base is not None:
                    pct = 100.0 * (now - base) / base if base else (0.0 if now == 0 else 100.0)
                    limit = 0 if key == "latches" else area_tolerance
                    verdict = "FAIL" if (now > base and pct > limit) else ("better" if now < base else "ok")
                deltas.append(Delta(key, j.preset, "synth", base, now, pct, verdict))
        if j.kind == "synth" and j.metrics.get("timing"):
            base = (fmax_base or {}).get(j.preset, {}).get("fmax_mhz")
            now = j.metrics["timing"]["fmax_mhz"]
            verdict, pct = "new", None
            if base:
                pct = 100.0 * (now - base) / base
                verdict = "FAIL" if -pct > fmax_tolerance else ("better" if now > base else "ok")
            deltas.append(Delta("fmax_mhz", j.preset, "synth", base, now, pct, verdict))
    return deltas, all(d.verdict != "FAIL" for d in deltas)


def updated(jobs, cycles, area):
    """The baselines with this run's passing figures written in."""
    cycles, area = copy.deepcopy(cycles), copy.deepcopy(area)
    for j in jobs:
        if j.status != "pass":
            continue
        if j.kind in ("replay", "perf") and "cycles" in j.metrics:
            cycles.setdefault(j.preset, {})[j.name] = j.metrics["cycles"]
        if j.kind == "synth" and j.metrics:
            area[j.preset] = {k: j.metrics[k] for k in LIMITED if k in j.metrics}
    return cycles, area


def updated_fmax(jobs, fmax):
    """rtl/fmax.json with this run's passing estimates written in (the fields scripts/synth
    --update-fmax writes)."""
    fmax = copy.deepcopy(fmax)
    for j in jobs:
        if j.status == "pass" and j.kind == "synth" and j.metrics.get("timing"):
            fmax[j.preset] = {k: j.metrics["timing"][k] for k in FMAX_KEYS}
    return fmax


def write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
