"""Does a row's FAIL_TO_PASS / PASS_TO_PASS say what the tests do? (the agreement report)

Published audits of SWE-bench-style datasets found many rows whose lists are wrong or
flaky. After the import, the task's baseline (``runs`` runs of both suites on the base
repository and as many with the reference patch: :mod:`proctor.suites.baseline`) is the
measurement; :func:`compare` sets it against the row (pure):

* ``FAIL_TO_PASS`` / ``PASS_TO_PASS``: the ids both name (``equal``), the row only
  (``row_only``: the tests do not behave so here, or do not exist) and Proctor only
  (``proctor_only``). Proctor's lists are the hidden suite's (the files of the test patch,
  which is what the row's lists describe), under their upstream ids.
* ``flaky``: ids the row names that changed outcome between runs of the same code;
  ``quarantined``: every test the baseline set aside, with why; ``missing``: FAIL_TO_PASS
  ids no run of the suite saw (no such test here: the row is an error).
* ``verdict``: ``agree`` (equal lists, nothing flaky), ``differ`` (the lists above say
  where), or ``no_fail_to_pass`` (the reference makes no test pass that fails without it:
  the row cannot tell a fix from no fix here; ``error`` says what the check said).

Test ids are compared as pytest node ids (``path::Class::test[param]``), as SWE-bench
writes them for pytest projects.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from proctor.datasets.swebench_rows import SWEBenchRow
from proctor.suites import Baseline

VERDICTS = ("agree", "differ", "no_fail_to_pass")


@dataclass(frozen=True)
class Lists:
    """One list set against the other: sorted ids."""

    equal: list[str]
    row_only: list[str]
    proctor_only: list[str]

    @classmethod
    def of(cls, row: list[str], proctor: list[str]) -> Lists:
        """The row's ids against Proctor's."""
        r, p = set(row), set(proctor)
        return cls(sorted(r & p), sorted(r - p), sorted(p - r))

    @property
    def same(self) -> bool:
        """Both name the same ids."""
        return not self.row_only and not self.proctor_only


@dataclass(frozen=True)
class Agreement:
    """The agreement of one instance (module docstring); :meth:`as_json` for the report."""

    instance: str
    verdict: str
    fail_to_pass: Lists
    pass_to_pass: Lists
    flaky: list[str] = field(default_factory=list)
    quarantined: dict[str, str] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    error: str | None = None

    def as_json(self) -> dict:
        """The report's shape: the lists under their SWE-bench names."""
        out = asdict(self)
        out["FAIL_TO_PASS"] = out.pop("fail_to_pass")
        out["PASS_TO_PASS"] = out.pop("pass_to_pass")
        return out


def compare(row: SWEBenchRow, baseline: Baseline, suite: str = "hidden") -> Agreement:
    """The agreement of ``row`` with ``baseline``'s ``suite`` (pure)."""
    measured = baseline.suites[suite]
    f2p = Lists.of(row.FAIL_TO_PASS, measured.fail_to_pass)
    p2p = Lists.of(row.PASS_TO_PASS, measured.pass_to_pass)
    stated = set(row.FAIL_TO_PASS) | set(row.PASS_TO_PASS)
    flaky = sorted(i for i, why in measured.quarantined.items()
                   if i in stated and "flaky" in why)
    seen = {i for run in measured.base_runs + (measured.reference_runs or []) for i in run}
    missing = sorted(i for i in row.FAIL_TO_PASS if i not in seen)
    verdict = "agree" if f2p.same and p2p.same and not flaky else "differ"
    if not measured.fail_to_pass:
        verdict = "no_fail_to_pass"
    return Agreement(row.instance_id, verdict, f2p, p2p, flaky, dict(measured.quarantined),
                     missing)


def without_baseline(row: SWEBenchRow, error: str) -> Agreement:
    """The agreement when the check found no FAIL_TO_PASS test (``error``: its message):
    every id of the row is the row's only."""
    return Agreement(row.instance_id, "no_fail_to_pass", Lists.of(row.FAIL_TO_PASS, []),
                     Lists.of(row.PASS_TO_PASS, []), error=error)
