"""Score every patch of the blind round (:mod:`blind_shapes`) and write the records.

``python3 tests/redteam/blind_run.py OUT.json`` builds the task in a temporary directory,
checks each patch on the host first (plain pytest, public then hidden, and the production
probe: an honest patch must pass all three, a cheat the tests but not the probe), then
scores it with ``proctor.score(task, patch, sandbox="docker")`` and writes, per patch: kind,
host check, reward, reason, components, penalties, flags, integrity reasons, evidence keys
and the tamper findings. Prints a table. ``--verify-only``: the host check alone (no sandbox).
``--report OUT.json``: the markdown tables and counts of the README from a results file.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout: tests.redteam

from tests.redteam import blind_shapes  # noqa: E402


def summarize(name: str, kind: str, description: str, host: dict, record) -> dict:
    """One patch's line of the results file."""
    data = record.model_dump(mode="json", by_alias=True)
    return {
        "name": name,
        "kind": kind,
        "description": description,
        "host_check": {k: v for k, v in host.items() if k != "output"},
        "host_check_ok": blind_shapes.expected_ok(kind, host),
        "status": data["status"],
        "reward": data["reward"],
        "reason": data["reason"],
        "components": data["components"],
        "penalties": data["penalties"],
        "flags": data["flags"],
        "integrity_violated": data["integrity"]["violated"],
        "integrity_reasons": data["integrity"]["reasons"],
        "evidence_keys": sorted(data["evidence"]),
        "penalty_indicators": (data.get("measurements") or {}).get("penalty_indicators", {}),
        "notes": (data.get("measurements") or {}).get("notes", {}),
        "error": data.get("error"),
        "findings": data["evidence"].get("tamper", {}).get("details", {}).get("findings"),
    }


def flags_on(flags: dict) -> str:
    """The flags that are set, comma-separated."""
    return ",".join(k for k, v in flags.items() if v) or "-"


def table(rows: list[dict]) -> str:
    """A plain-text table of the results."""
    lines = [f"{'patch':34} {'kind':6} {'reward':>8}  {'reason':28} {'penalties':24} flags"]
    for r in rows:
        reward = "None" if r["reward"] is None else f"{r['reward']:.4f}"
        pens = ",".join(f"{k}={v:g}" for k, v in r["penalties"].items() if v) or "-"
        lines.append(f"{r['name']:34} {r['kind']:6} {reward:>8}  {str(r['reason'])[:28]:28} "
                     f"{pens[:24]:24} {flags_on(r['flags'])}")
    return "\n".join(lines)


def penalised(r: dict) -> bool:
    """Any penalty, or a flag that keeps the rollout out of training as it is."""
    f = r["flags"]
    return (any(v for v in r["penalties"].values()) or f.get("exclude_from_advantage")
            or f.get("tests_tampered") or f.get("tripwire") or r["integrity_violated"])


def report(rows: list[dict]) -> str:
    """Markdown: the results table and the counts."""
    out = ["| patch | kind | reward | reason | penalties | flags |", "|---|---|---|---|---|---|"]
    for r in rows:
        reward = "None" if r["reward"] is None else f"{r['reward']:.4f}"
        pens = ", ".join(f"{k}={v:g}" for k, v in r["penalties"].items() if v) or "-"
        out.append(f"| `{r['name']}` | {r['kind']} | {reward} | {r['reason'] or '-'} | {pens} "
                   f"| {flags_on(r['flags'])} |")
    honest = [r for r in rows if r["kind"] == "honest"]
    cheats = [r for r in rows if r["kind"] == "cheat"]
    minus_one = [r["name"] for r in honest if r["reward"] is not None and r["reward"] <= -0.999]
    pen = [r["name"] for r in honest if penalised(r)]
    caught = [r["name"] for r in cheats if r["reward"] is not None and r["reward"] <= -0.999]
    above = [r["name"] for r in cheats if r["reward"] is not None and r["reward"] > 0.0]
    flagged = [r["name"] for r in cheats if penalised(r)]
    out += ["", f"- honest: {len(honest)}; scored -1.0: {len(minus_one)} {minus_one}",
            f"- honest penalised or excluded from advantage: {len(pen)} {pen}",
            f"- cheats: {len(cheats)}; caught at -1.0: {len(caught)} {caught}",
            f"- cheats penalised or flagged at all: {len(flagged)} {flagged}",
            f"- cheats above 0.0: {len(above)} {above}"]
    return "\n".join(out + ["", findings_table(rows), "", verdicts_table(rows)])


def verdicts_table(rows: list[dict]) -> str:
    """Precision and recall of the worst reward, overall and per finding kind: a patch
    counts as caught at -1.0, as penalised (a penalty or out of the advantage, above -1.0),
    or as free; for each kind, the patches with a finding of that kind."""
    def state(r: dict) -> str:
        if r["reward"] is not None and r["reward"] <= -0.999:
            return "minus_one"
        return "penalised" if penalised(r) else "free"

    out = ["| finding kind | cheats with it: -1.0 / penalised / free "
           "| honest with it: -1.0 / penalised / free |", "|---|---|---|"]
    kinds = sorted({f["kind"] for r in rows for f in r["findings"] or []})
    for kind in kinds:
        cells = []
        for who in ("cheat", "honest"):
            with_it = [state(r) for r in rows if r["kind"] == who
                       and any(f["kind"] == kind for f in r["findings"] or [])]
            cells.append(" / ".join(str(with_it.count(s))
                                    for s in ("minus_one", "penalised", "free")))
        out.append(f"| {kind} | {cells[0]} | {cells[1]} |")
    minus = [r for r in rows if state(r) == "minus_one"]
    cheats = [r for r in rows if r["kind"] == "cheat"]
    caught = [r for r in minus if r["kind"] == "cheat"]
    precision = f"{len(caught)}/{len(minus)}" if minus else "-"
    out += ["", f"- -1.0 precision (cheats among the -1.0s): {precision}; recall (cheats "
                f"caught at -1.0): {len(caught)}/{len(cheats)}"]
    confirmed = [r["name"] for r in rows if any("confirmed by a differential run" in x
                                                 for x in r.get("integrity_reasons") or [])]
    out.append(f"- -1.0 from a differential run: {len(confirmed)} {confirmed}")
    return "\n".join(out)


def findings_table(rows: list[dict]) -> str:
    """Per finding kind of the tamper evidence: patches flagged (cheats = true positives,
    honest = false positives), the severities seen, and the cheats with no finding at all."""
    kinds: dict[str, dict] = {}
    for r in rows:
        found = r["findings"] or []
        for f in found:
            k = kinds.setdefault(f["kind"], {"tp": set(), "fp": set(), "sev": set()})
            k["tp" if r["kind"] == "cheat" else "fp"].add(r["name"])
            k["sev"].add(f["severity"])
    out = ["| finding kind | severity | true positives (cheats) | false positives (honest) |",
           "|---|---|---|---|"]
    for name, k in sorted(kinds.items()):
        tp = ", ".join(f"`{n}`" for n in sorted(k["tp"])) or "-"
        fp = ", ".join(f"`{n}`" for n in sorted(k["fp"])) or "-"
        out.append(f"| {name} | {'/'.join(sorted(k['sev']))} | {len(k['tp'])}: {tp} "
                   f"| {len(k['fp'])}: {fp} |")
    silent = [r["name"] for r in rows if r["kind"] == "cheat" and not r["findings"]]
    out += ["", f"- cheats with no finding at all: {len(silent)} {silent}"]
    return "\n".join(out)


def main(argv: list[str]) -> int:
    """Build, check, score, write; returns the exit status."""
    if argv[:1] == ["--report"] and len(argv) == 2:
        print(report(json.loads(Path(argv[1]).read_text())))
        return 0
    verify_only = "--verify-only" in argv
    args = [a for a in argv if a != "--verify-only"]
    if len(args) != 1 and not verify_only:
        print(__doc__, file=sys.stderr)
        return 2
    root = Path(tempfile.mkdtemp(prefix="blind-run-"))
    try:
        task = blind_shapes.build_task(root / "task")
        diffs = blind_shapes.patches(task)
        hosts = {}
        for name, data in diffs.items():
            kind = blind_shapes.PATCHES[name][0]
            hosts[name] = blind_shapes.verify_on_host(task, data)
            ok = blind_shapes.expected_ok(kind, hosts[name])
            print(f"host {'ok ' if ok else 'BAD'} {kind:6} {name}", flush=True)
        if verify_only:
            return 0 if all(blind_shapes.expected_ok(blind_shapes.PATCHES[n][0], h)
                            for n, h in hosts.items()) else 1
        from proctor import score

        rows = []
        for name, data in diffs.items():
            kind, description, _ = blind_shapes.PATCHES[name]
            start = time.monotonic()
            record = score(task, data, rollout_id=name, sandbox="docker")
            rows.append(summarize(name, kind, description, hosts[name], record))
            print(f"scored {name}: {record.reward} {record.reason} "
                  f"({time.monotonic() - start:.1f} s)", flush=True)
        Path(args[0]).write_text(json.dumps(rows, indent=1, sort_keys=True) + "\n")
        print(table(rows))
        return 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
