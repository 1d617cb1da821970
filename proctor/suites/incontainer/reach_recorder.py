"""Which tests reach which functions of the repository (a pytest plugin, baseline only).

Registered by ``run_pytest.py --reach-out FILE`` in one extra session per suite on the
pristine repository, never in a run that is scored: it traces every Python call
(``sys.settrace``, call events only, no line events) and, per test (setup, call and
teardown), records the functions of the repository's non-test modules it entered, keyed
``<repo-relative path>::<co_qualname>``. At the session's end it writes FILE (JSON)::

    {"tests": [test id, ...],            # every test that ran, in order
     "reach": {key: [test index, ...]},  # indices into "tests"
     "lost": [test id, ...]}             # tests during which the trace was replaced

The mutation step (``proctor/suites/mutation.py``) uses the map to run its stats pass only
over tests that can reach the code a patch changed. A test whose trace the code under test
replaced (``sys.settrace`` of its own) is ``lost``: its reach is unknown, and the mutation
step keeps it. Threads started by tests are traced too (``threading.settrace``); child
processes are not (mutation's stats pass does not see them either).
"""

import json
import os
import sys
import threading

TEST_NAMES = ("test_", "conftest.py")


def _is_test_file(rel):
    base = rel.rsplit("/", 1)[-1]
    return base.startswith(TEST_NAMES) or base.endswith("_test.py")


class ReachRecorder:
    """The pytest plugin; ``repo``: the repository root, ``out``: the JSON file written."""

    def __init__(self, repo, out):
        self.root = os.path.join(os.path.realpath(repo), "")
        self.out = out
        self.keys = {}  # id(code) -> (code, key or ""): the code kept alive, so ids stay
        self.current = None
        self.tests, self.reach, self.lost = [], {}, []

    def _key(self, code):
        path = code.co_filename
        if not path.startswith("/"):  # "<frozen os>", "<string>": no file of the repo
            return ""
        if not path.startswith(self.root):
            path = os.path.realpath(path)
        if not path.startswith(self.root):
            return ""
        rel = path[len(self.root):]
        return "" if _is_test_file(rel) else f"{rel}::{code.co_qualname}"

    def trace(self, frame, event, arg):
        code = frame.f_code
        entry = self.keys.get(id(code))
        if entry is None or entry[0] is not code:
            entry = self.keys[id(code)] = (code, self._key(code))
        if entry[1] and self.current is not None:
            hit = self.reach.setdefault(entry[1], [])
            if not hit or hit[-1] != self.current:
                hit.append(self.current)
        return None

    def pytest_sessionstart(self, session):
        threading.settrace(self.trace)
        sys.settrace(self.trace)

    def pytest_runtest_logstart(self, nodeid, location):
        self.current = len(self.tests)
        self.tests.append(nodeid)
        if sys.gettrace() != self.trace:
            sys.settrace(self.trace)

    def pytest_runtest_logfinish(self, nodeid, location):
        if sys.gettrace() != self.trace:  # the test replaced it: what it reached is unknown
            self.lost.append(nodeid)
            sys.settrace(self.trace)
        self.current = None

    def pytest_sessionfinish(self, session):
        sys.settrace(None)
        threading.settrace(None)
        with open(self.out, "w", encoding="utf-8") as fh:
            json.dump({"tests": self.tests, "reach": self.reach, "lost": self.lost}, fh)
