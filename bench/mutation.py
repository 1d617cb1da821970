"""Mutation step: changed-lines mode against mutation testing of the whole module.

    python bench/mutation.py [--repeats 3] [--cpus 2] [--skip-mutmut]

On the toolz example task, in one sandbox with ``--cpus`` CPUs (workers = CPUs), after the
patch is applied and the public and hidden suites ran (their passing tests are the killers):

1. changed-lines mode: :func:`proctor.suites.mutation.run_mutation` on the reference fix
   plus an untested extra branch (the example of a surviving mutant), ``--repeats`` times;
2. the same step with every line of ``toolz/itertoolz.py`` marked changed and no cap on the
   number of mutants (our generator and runner over the whole module);
3. ``mutmut run`` (mutmut's own runner, ``--max-children`` = CPUs) over the whole module,
   same tests, in the same sandbox: the side-by-side reference.

Prints the step's wall time, mutants, mutants per second, and the fit "fixed + per mutant"
from (1) and (2). Target for (1): at most 1 s fixed + 30 ms per mutant.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from proctor import load_task
from proctor.harness.integrity import (
    ForbiddenRules,
    check_integrity,
)
from proctor.harness.pipeline import SuiteRequest, open_patched_sandbox, run_hidden, run_public
from proctor.harness.pipeline.workspace import kill_user_processes
from proctor.patch import PatchSummary
from proctor.sandbox import (
    MUTATION_DIR,
    Limits,
    SandboxSpec,
    docker_client,
    resolve_image,
)
from proctor.suites import (
    mutant_generator,
    mutation,
    run_mutation,
)
from proctor.task import MutationConfig

MODULE = "toolz/itertoolz.py"
FIXED_S, PER_MUTANT_S = 1.0, 0.030


def _make_task_module():
    spec = importlib.util.spec_from_file_location("mk", ROOT / "examples/toolz/make_task.py")
    mk = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mk)
    return mk


def extra_branch_patch(mk, task) -> bytes:
    """The reference fix plus an untested ``elif index is None`` branch."""
    extra = mk.GETTER_ORIGINAL.replace(
        "    else:\n        return operator.itemgetter(index)\n",
        "    elif index is None:\n        return lambda x: x\n"
        "    else:\n        return operator.itemgetter(index)\n")
    return mk.make_patch(task.repo, {mk.BUGGY_FILE: (mk.GETTER_BUGGY, extra)})


def summary_of(task, patch: bytes) -> PatchSummary:
    rules = ForbiddenRules.for_task(task.config.forbidden, task.hidden_only_files,
                                    existing_top_level=[p.name for p in task.repo.iterdir()])
    summary, verdict = check_integrity(patch.decode(), rules, None)
    assert not verdict.violated, verdict
    return summary


def timed(sb, task, patch, summary, killers, cpus, timeout=120.0, every_line=False):  # noqa: PLR0913
    """(wall s, mutants judged, result) of one step; ``every_line``: mutate every added
    line of ``summary``, changed code or not (the whole-module run marks every line). The
    step's copy of an earlier run is removed first (a scored sandbox runs one step), and its
    mutants are made anew."""
    kill_user_processes(sb)
    res = sb.run(["sh", "-c", f"if [ -e {MUTATION_DIR} ]; then chmod -R u+w {MUTATION_DIR} && "
                  f"rm -rf {MUTATION_DIR}; fi"], timeout=120, cwd="/", user="0:0")
    assert res.ok, res.output
    mutant_generator.forget_answers()
    keep = mutation.changed_code_lines
    if every_line:
        mutation.changed_code_lines = lambda added, texts: added
    t = time.monotonic()
    try:
        res = run_mutation(sb, task, patch, "git_apply", summary, killers,
                           workers=max(1, int(cpus)), cpus=cpus, timeout=timeout)
    finally:
        mutation.changed_code_lines = keep
    wall = time.monotonic() - t
    n = sum(res.counts.values())
    return wall, n, res


def mutmut_reference(sb, task, hidden_root: str, cpus: float) -> tuple[float, int, str]:
    """``mutmut run`` over MODULE with the public + hidden tests, as the sandbox user."""
    tests = [*task.config.tests.public, *task.hidden_files]
    conf = ("\n[tool.mutmut]\nsource_paths = [\"toolz\"]\n"
            f"only_mutate = [\"{MODULE}\"]\n"
            "pytest_add_cli_args = [\"-p\", \"no:cacheprovider\", \"-q\"]\n"
            f"pytest_add_cli_args_test_selection = {tests!r}\n").replace("'", '"')
    sb.put_files("/tmp/mmref-in", {"mutmut.toml": conf.encode()})
    script = ("set -e; rm -rf /tmp/mmref; cp -a /work/repo /tmp/mmref; cd /tmp/mmref; "
              "cat /tmp/mmref-in/mutmut.toml >> pyproject.toml; "
              f"cp -r {hidden_root}/. /tmp/mmref/; chmod -R u+w /tmp/mmref; "
              f"/opt/proctor/venv/bin/mutmut run --max-children {max(1, int(cpus))} 2>&1 "
              "| tail -c 600")
    t = time.monotonic()
    res = sb.run(["sh", "-c", script], timeout=1800)
    wall = time.monotonic() - t
    m = re.findall(r"(\d+)/(\d+)\s", res.output)
    n = int(m[-1][1]) if m else 0
    return wall, n, res.output.strip().splitlines()[-1] if res.output.strip() else ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cpus", type=float, default=2.0)
    ap.add_argument("--skip-mutmut", action="store_true", help="skip `mutmut run` (~2 min)")
    args = ap.parse_args()
    mk = _make_task_module()
    task_dir = subprocess.run([sys.executable, str(ROOT / "examples/toolz/make_task.py")],
                              check=True, capture_output=True, text=True).stdout.split("\n")[-2]
    task = load_task(task_dir)
    image, _ = resolve_image(docker_client())
    patch = extra_branch_patch(mk, task)
    summary = summary_of(task, patch)
    lines = (task.repo / MODULE).read_text().count("\n")
    # every line of the patched module (longer than the base one: pad generously)
    whole = dataclasses.replace(summary, added_line_numbers={MODULE: list(range(1, lines + 100))})
    whole_task = task.model_copy(update={"config": task.config.model_copy(
        update={"mutation": MutationConfig(max_mutants=10_000)})})
    spec = SandboxSpec(image, limits=Limits(cpus=args.cpus))
    sb, applied = open_patched_sandbox(task, spec, patch)
    with sb:
        assert applied.applied
        runs = [run_public(sb, task, SuiteRequest(300)), run_hidden(sb, task, SuiteRequest(300))]
        killers = sorted(t for r in runs for t, o in r.outcomes.items() if o == "passed")
        hidden_root = runs[1].command.split("--rootdir=")[1].split()[0]
        changed = [timed(sb, task, patch, summary, killers, args.cpus)
                   for _ in range(args.repeats)]
        full = timed(sb, whole_task, patch, whole, killers, args.cpus, timeout=1200,
                     every_line=True)
        ref = None if args.skip_mutmut else mutmut_reference(sb, task, hidden_root, args.cpus)

    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"task {task.id}, image {image}, {args.cpus:g} CPUs, workers {int(args.cpus)}, "
          f"host load average {load} (other work on the machine inflates every figure)")
    wall = statistics.median(w for w, _, _ in changed)
    n = changed[0][1]
    score = changed[0][2].score
    print(f"changed lines  : {n} mutants, step wall median {wall:.3f} s over {args.repeats} "
          f"runs ({n / wall:.1f} mutants/s), score {score}")
    target = FIXED_S + PER_MUTANT_S * n
    print(f"                 target 1 s + 30 ms x {n} = {target:.3f} s: "
          f"{'met' if wall <= target else 'NOT met'} (runs: "
          f"{', '.join(f'{w:.3f}' for w, _, _ in changed)} s)")
    t = changed[0][2].evidence.details.get("timing", {})
    print(f"                 prepare+generate {t.get('prepare_and_generate_s')} s, "
          f"runner {t.get('runner_s')} s (mutant loop {t.get('mutants_s')} s)")
    fw, fn, fres = full
    ft = fres.evidence.details.get("timing", {})
    print(f"whole module   : {fn} mutants, step wall {fw:.3f} s ({fn / fw:.1f} mutants/s), "
          f"score {fres.score:.3f} [proctor runner, every line of {MODULE}]")
    print(f"                 prepare+generate {ft.get('prepare_and_generate_s')} s, "
          f"runner {ft.get('runner_s')} s (mutant loop {ft.get('mutants_s')} s)")
    if ft.get("mutants_s"):
        print(f"                 mutant loop per mutant: {ft['mutants_s'] / fn * 1000:.1f} ms "
              f"(verdicts {fres.counts})")
    if fn > n:
        per = (fw - wall) / (fn - n)
        fixed = wall - per * n
        ok = fixed <= FIXED_S and per <= PER_MUTANT_S
        print(f"two-point fit  : {fixed:.3f} s fixed + {per * 1000:.1f} ms per mutant (target "
              f"<= {FIXED_S:g} s + {PER_MUTANT_S * 1000:g} ms: {'met' if ok else 'NOT met'})")
    if ref is not None:
        rw, rn, tail = ref
        print(f"mutmut run     : {rn} mutants, wall {rw:.3f} s ({rn / rw:.1f} mutants/s) "
              f"[mutmut 3.8.1's own runner, whole module]  {tail[-120:]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
