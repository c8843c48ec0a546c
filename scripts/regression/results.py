"""Reading a job's result: Catch2's XML report for the cosimulation tests, the JSON that
`tessera replay` and `tessera gemm` print, and the synthesis summary."""
import json
import pathlib
import re
import xml.etree.ElementTree as ET

SEED = re.compile(r"seed: (\d+)")
FAILURES = ("Failure", "Exception", "FatalErrorCondition")


def tail(text, n=400):
    return text.strip()[-n:]


def first_catch2_failure(root):
    """The first failed assertion of a Catch2 XML report, in words: the scoreboard's message where one
    of the INFO messages in scope carries it (it names the first wrong write), else FAIL's message,
    the exception's text or the assertion with its values. "" when nothing failed."""
    infos = []
    for el in root.iter():
        if el.tag == "Info":
            infos.append((el.text or "").strip())
        elif el.tag == "Expression" and el.get("success") == "true":
            infos = []
        elif el.tag in FAILURES or (el.tag == "Expression" and el.get("success") == "false"):
            scoreboard = [i for i in infos if i.startswith("scoreboard: ")]
            if scoreboard:
                return scoreboard[0]
            if el.tag != "Expression":
                return (el.text or "").strip() or el.tag
            original = (el.findtext("Original") or "").strip()
            expanded = (el.findtext("Expanded") or "").strip()
            text = f"{el.get('type', 'CHECK')}( {original} )" + (f" with {expanded}" if expanded != original else "")
            return "; ".join([text, *infos])
    return ""


def parse_catch2(job, xml_text):
    seeds = SEED.findall(xml_text or "") or SEED.findall(job.output)
    if seeds:
        job.seed = int(seeds[0])
    if job.status == "pass" or job.detail:
        return
    try:
        job.detail = first_catch2_failure(ET.fromstring(xml_text)) if xml_text else ""
    except ET.ParseError:  # the test died mid-report
        job.detail = ""
    job.detail = job.detail or tail(job.output) or "failed with no output"


def json_object(text):
    """The JSON object a command printed, amid whatever else it wrote."""
    return json.loads(text[text.index("{"):text.rindex("}") + 1])


def parse_replay(job):
    try:
        j = json_object(job.output)
        job.metrics["cycles"] = j["cycles"]["replayed"]
        if j.get("result") != "pass":
            job.detail = j.get("first_mismatch", "")
    except (ValueError, KeyError):
        job.status = "fail"
        job.detail = job.detail or tail(job.output)


def parse_perf(job):
    try:
        j = json_object(job.output)
        job.metrics["cycles"] = j["cycles"]
        if not j.get("bit_exact"):
            job.status = "fail"
            job.detail = j.get("mismatch", "not bit-exact") + " " + j.get("scoreboard", {}).get("detail", "")
    except (ValueError, KeyError):
        job.status = "fail"
        job.detail = job.detail or tail(job.output)


def parse_synth(job):
    try:
        job.metrics.update(json.loads(pathlib.Path(job.env["SYNTH_JSON"]).read_text())[job.preset])
    except (OSError, KeyError, ValueError):
        job.detail = job.detail or tail(job.output)


def parse(job, catch2_xml=None):
    """Fills in the job's seed, metrics and, where it failed, why; may turn a pass into a fail (a
    replay or workload whose output is not the JSON expected)."""
    if job.kind in ("directed", "random"):
        parse_catch2(job, catch2_xml)
    elif job.kind == "replay":
        parse_replay(job)
    elif job.kind == "perf":
        parse_perf(job)
    elif job.kind == "synth":
        parse_synth(job)
    if job.status != "pass" and not job.detail:
        job.detail = tail(job.output)
