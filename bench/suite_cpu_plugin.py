"""pytest plugin of ``bench/suite_cpu.py``: the CPU each test costs.

Per test, appended as one JSON line to ``$PROCTOR_SUITE_CPU_DIR/<xdist worker>.jsonl``: its
wall time, this process's CPU (user + system), the CPU of the children it reaped (the local
backend's sandboxes, CLI subprocesses), and the CPU of the Docker sandboxes it closed
(their cgroup v1 ``cpuacct.usage``, read just before removal, as ``bench/cpu.py`` does). A
test's share of the engine (dockerd, containerd, runc, the kernel's namespace work) is in
none of them: ``suite_cpu.py`` reports it as the machine's busy CPU left unattributed.
Each line also says whether the test is marked ``waits`` and whether it runs on the local
backend (whose sandboxes' CPU is only partly counted: the processes bubblewrap reaps).
Loaded only by ``suite_cpu.py`` (``-p bench.suite_cpu_plugin``).
"""

from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path

import pytest

from bench.cpu import CGROUP

_state = {"containers_s": 0.0, "out": None}


def _rusage() -> tuple[float, float]:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


def pytest_configure(config) -> None:
    out_dir = Path(os.environ["PROCTOR_SUITE_CPU_DIR"])
    worker = getattr(config, "workerinput", {}).get("workerid", "main")
    _state["out"] = (out_dir / f"{worker}.jsonl").open("a")
    from proctor.sandbox import docker_backend

    close = docker_backend.DockerSandbox.close

    def measured_close(sb) -> None:
        container = getattr(sb, "_container", None)
        if container is not None:
            try:
                usage = (CGROUP / container.id / "cpuacct.usage").read_text()
                _state["containers_s"] += int(usage) / 1e9
            except (OSError, ValueError):
                pass  # no cgroup v1 accounting here: the containers' CPU stays unattributed
        close(sb)

    docker_backend.DockerSandbox.close = measured_close


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    own0, kids0 = _rusage()
    cont0, start = _state["containers_s"], time.monotonic()
    yield
    own1, kids1 = _rusage()
    _state["out"].write(json.dumps({
        "id": item.nodeid, "wall_s": round(time.monotonic() - start, 3),
        "self_s": round(own1 - own0, 3), "children_s": round(kids1 - kids0, 3),
        "containers_s": round(_state["containers_s"] - cont0, 3),
        "waits": item.get_closest_marker("waits") is not None,
        "local": item.get_closest_marker("local") is not None}) + "\n")
    _state["out"].flush()
