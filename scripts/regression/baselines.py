"""Cycles and area held to the checked-in baselines (tests/baselines), and the estimated Fmax to
rtl/fmax.json (the clock the runtime's reports use)."""
import copy
import dataclasses
import json

AREA_KEYS = ["luts", "ffs", "dsps", "brams"]
LIMITED = AREA_KEYS + ["latches"]


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


def _delta(what, preset, item, base, now, limit, higher_is_worse=True):
    """One figure against its baseline: FAIL past `limit` percent in the worse direction, `better`
    in the other, `new` without a baseline."""
    if base is None:
        return Delta(what, preset, item, None, now, None, "new")
    pct = 100.0 * (now - base) / base if base else (0.0 if now == 0 else 100.0)
    worse = pct if higher_is_worse else -pct
    return Delta(what, preset, item, base, now, pct, "FAIL" if worse > limit else ("better" if worse < 0 else "ok"))


def compare(jobs, cycles_base, area_base, cycle_tolerance, area_tolerance, fmax_base=None, fmax_tolerance=2.0):
    """The deltas of this run's cycles, area and Fmax against the baselines, and whether all are
    within budget: cycles may grow by cycle_tolerance percent, resources by area_tolerance, latches
    not at all, and the estimated Fmax may fall by fmax_tolerance percent."""
    deltas = []
    for j in jobs:
        if j.kind in ("replay", "perf") and "cycles" in j.metrics:
            deltas.append(_delta("cycles", j.preset, j.name, cycles_base.get(j.preset, {}).get(j.name),
                                 j.metrics["cycles"], cycle_tolerance))
        if j.kind == "synth" and j.metrics:
            for key in LIMITED:
                if key in j.metrics:
                    deltas.append(_delta(key, j.preset, "synth", area_base.get(j.preset, {}).get(key), j.metrics[key],
                                         0 if key == "latches" else area_tolerance))
        if j.kind == "synth" and j.metrics.get("timing"):
            deltas.append(_delta("fmax_mhz", j.preset, "synth", (fmax_base or {}).get(j.preset, {}).get("fmax_mhz"),
                                 j.metrics["timing"]["fmax_mhz"], fmax_tolerance, higher_is_worse=False))
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


def fmax_entry(timing):
    """A preset's entry in rtl/fmax.json, from scripts/synth's timing result (all but the path)."""
    return {k: v for k, v in timing.items() if k != "path"}


def updated_fmax(jobs, fmax):
    """rtl/fmax.json with this run's passing estimates written in."""
    fmax = copy.deepcopy(fmax)
    for j in jobs:
        if j.status == "pass" and j.kind == "synth" and j.metrics.get("timing"):
            fmax[j.preset] = fmax_entry(j.metrics["timing"])
    return fmax


def write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
