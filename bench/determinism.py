"""Same patch, same record: every candidate, abuse case and honest failure scored N times.

    python bench/determinism.py [--n 5] [--sandbox docker|local] [--only NAME ...]
                                [--json OUT]

Cases: the toolz example's candidate patches (``examples/toolz``), the abuse cases of
``bench/abuse_cases.py`` on their small-limits task, the honest failures of every
early-end kind of ``bench/honest_failures.py`` on theirs, and the differential runs' cheats
and honest look-alikes (``tests/redteam/differential_shapes.py``) on the red-team mini task.
Each is scored ``--n`` times, one after the other (``proctor.score`` measures every time:
the result cache is for batches).

Compared across the repeats, field by field: ``status``, ``reward``, ``reason``,
``components``, ``penalties``, ``flags``, ``integrity``, and per suite ``ended_early``; these
must never differ (the target: none). Per-test outcomes are compared too and reported
apart: a test the suite's budget cut may be ``not_run`` one time and ``timeout`` the next
without the reward moving. Prints one line per case (the distinct rewards, the fields that
differed) and a summary; exit 0 only when no compared field differed.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import honest_failures
from bench.abuse_cases import ABUSES, make_abuse_task
from bench.batch import load_make_task
from proctor import score
from proctor.sandbox import choose_backend
from proctor.suites import mutant_generator
from proctor.task import load_task
from tests.redteam import mini_task
from tests.redteam.differential_shapes import SCORED, full_patch

STRICT = ("status", "reward", "reason", "components", "penalties", "flags", "integrity")


def fingerprint(rec) -> dict:
    """The fields of one record that must not change between scores of the same patch."""
    data = json.loads(rec.to_json())
    out = {key: data.get(key) for key in STRICT}
    out["ended_early"] = {suite: (data["evidence"].get(f"{suite}_tests") or {})
                          .get("details", {}).get("ended_early")
                          for suite in ("public", "hidden")}
    return out


def outcomes(rec) -> dict:
    return {suite: {**t.fail_to_pass, **t.pass_to_pass} for suite, t in rec.tests.items()}


def cases(work: Path) -> list[tuple[str, Path, bytes]]:
    """(name, task dir, patch) for every case."""
    mk = load_make_task()
    mk.build(work / "example")
    example = work / "example" / "task"
    out = [(f"toolz/{p.stem}", example, p.read_bytes())
           for p in sorted((work / "example" / "patches").glob("*.patch"))]
    abuse = make_abuse_task(example, work / "abuse-task")
    out += [(f"abuse/{name}", abuse, mk.make_patch(abuse / "repo", {"toolz/itertoolz.py": e}))
            for name, e in sorted(ABUSES.items())]
    hf = honest_failures.build_task(work / "honest-failures")
    out += [(f"honest/{name}", hf, patch)
            for name, patch in sorted(honest_failures.patches(hf).items())]
    mini = mini_task.build(work / "mini", mk.make_patch)
    task = load_task(mini)
    out += [(f"differential/{name}", mini, full_patch(task, mk.make_patch, source))
            for name, (source, _, _) in sorted(SCORED.items())]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=5, help="scores per case")
    ap.add_argument("--sandbox", choices=["docker", "local"], default=None)
    ap.add_argument("--only", nargs="*", default=None,
                    help="case names (or prefixes: toolz/, abuse/, honest/) to run")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = ap.parse_args(argv)
    backend = choose_backend(args.sandbox)
    work = Path(tempfile.mkdtemp(prefix="determinism-"))
    todo = [c for c in cases(work)
            if not args.only or any(c[0] == o or c[0].startswith(o) for o in args.only)]
    print(f"backend {backend}; {len(todo)} cases x {args.n} scores")
    results, bad, loose = {}, 0, 0
    start = time.monotonic()
    for name, task, patch in todo:
        prints, outs, secs = [], [], []
        for i in range(args.n):
            mutant_generator.forget_answers()  # each score makes its mutants anew
            t0 = time.monotonic()
            rec = score(task, patch, sandbox=backend, rollout_id=f"{name}-{i}")
            secs.append(time.monotonic() - t0)
            prints.append(fingerprint(rec))
            outs.append(outcomes(rec))
        differ = sorted({k for p in prints[1:] for k in p if p[k] != prints[0][k]})
        outcome_differ = any(o != outs[0] for o in outs[1:])
        bad += bool(differ)
        loose += outcome_differ
        rewards = sorted({p["reward"] for p in prints}, key=lambda r: (r is None, r))
        results[name] = {"rewards": rewards, "differ": differ,
                         "outcomes_differ": outcome_differ,
                         "seconds": [round(s, 2) for s in secs],
                         "flags": prints[0]["flags"], "ended_early": prints[0]["ended_early"]}
        flags = [k for k, v in (prints[0]["flags"] or {}).items() if v]
        print(f"{name:48s} reward {rewards} flags {flags or '-'} "
              f"{'DIFFER: ' + ', '.join(differ) if differ else 'same'}"
              f"{' (test outcomes differ)' if outcome_differ else ''} "
              f"[{min(secs):.1f}-{max(secs):.1f} s]", flush=True)
    print(f"\n{len(todo)} cases x {args.n}: {bad} with a differing field, {loose} with "
          f"differing per-test outcomes; {time.monotonic() - start:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
