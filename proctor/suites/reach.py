"""Which tests can reach the code a patch changed: the mutation stats pass's test selection.

The baseline records, in one extra session per suite on the pristine repository, which
functions each test entered (``incontainer/reach_recorder.py``; keys
``<repo path>::<qualified name>``). When every statement a patch changed lies in the body of
a function the pristine repository already has (:func:`proctor.suites.changed_code.
changed_functions`), a test that entered none of those functions on the pristine repository
cannot enter them on the patched one: up to its first call into changed code it runs only
code the patch did not change, from the same state, so it takes the same path. Such a test
cannot see any mutant of those functions, so mutation's stats pass (mutmut's "which tests
cover which function" run, a whole extra run of the suites) leaves it out. Anything else
(module-level or class-level code changed, a function added or its header changed, tests
the map does not know, tests whose trace was replaced) keeps every test. Pure.
"""

from __future__ import annotations

from pydantic import BaseModel


class ReachMap(BaseModel):
    """Tests of one suite and the functions each entered on the pristine repository.

    ``tests``: every test id that ran, in order; ``reach``: function key (``<repo path>::
    <qualified name>``) -> indices into ``tests``; ``lost``: tests whose reach is unknown
    (the code under test replaced the trace function while they ran)."""

    tests: list[str] = []
    reach: dict[str, list[int]] = {}
    lost: list[str] = []

    def merged(self, other: ReachMap) -> ReachMap:
        """This map followed by ``other`` (a later session of the same suite)."""
        shift = len(self.tests)
        reach = {k: list(v) for k, v in self.reach.items()}
        for key, idx in other.reach.items():
            reach.setdefault(key, []).extend(i + shift for i in idx)
        return ReachMap(tests=self.tests + other.tests, reach=reach,
                        lost=self.lost + other.lost)


def function_key(path: str, qualname: str) -> str:
    """The map's key of function ``qualname`` (``Class.method``, ``f.<locals>.g``) defined
    in repo-relative ``path``."""
    return f"{path}::{qualname}"


def unreaching_tests(maps: dict[str, ReachMap], functions: set[str] | None) -> list[str]:
    """Test ids (over every suite's map) that entered none of ``functions`` (keys, see
    :func:`function_key`) on the pristine repository: the stats pass may leave them out.
    Empty when ``functions`` is None (the patch changed more than function bodies), empty,
    or there is no map. Tests the maps list as ``lost``, or that ran more than once in
    them, are never left out. Sorted."""
    if not functions or not maps:
        return []
    out: set[str] = set()
    keep: set[str] = set()
    for m in maps.values():
        reached = {i for key in functions for i in m.reach.get(key, ())}
        seen: set[str] = set()
        for i, test_id in enumerate(m.tests):
            if test_id in seen:
                keep.add(test_id)
            seen.add(test_id)
            (keep if i in reached else out).add(test_id)
        keep |= set(m.lost)
    return sorted(out - keep)
