"""OpenRLHF 0.11: its own single-turn rollout executor (``SingleTurnAgentExecutor``, what
its vLLM engines run per sample) fetches rewards from Proctor, both ways the README shows:

* ``openrlhf-file``: ``--reward.remote_url /path/to/proctor/rl/openrlhf.py`` (OpenRLHF
  loads the file and calls its ``reward_func``);
* ``openrlhf-http``: ``--reward.remote_url http://127.0.0.1:PORT/get_reward`` against a real
  ``proctor serve`` started from the snippet's command on 127.0.0.1 (OpenRLHF's own HTTP
  client, aiohttp, 5 tries).

The executor decodes prompt + response with ``skip_special_tokens=False``, as OpenRLHF
does, so the query ends in the EOS token right after the model's closing diff fence. The
generation engine is the one stand-in: vLLM has no CPU build here, so a scripted engine
returns the response's token ids (tokenised by the tiny local tokenizer). Rewards must equal
``proctor.score`` of the same patches; a missing task or a label without a task is an error
record for that query only: reward 0.0 and ``proctor_valid`` 0.0. Every option of the
snippets' ``train_ppo_ray`` commands must be one that OpenRLHF's own argument parser
declares (read from its installed ``openrlhf/cli/train_ppo_ray.py``).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest

agent = pytest.importorskip("openrlhf.utils.agent",
                            reason="OpenRLHF not importable: bash scripts/test-trainers.sh runs "
                                   "this in a venv that has it")

from readme_snippets import option, shell_words  # noqa: E402 - after the skip
from tiny_lm import tiny_tokenizer  # noqa: E402
from trainer_cases import MISSING_TASK, PATCH_NAMES  # noqa: E402

_ADDRESS = r"http://(?:127\.0\.0\.1|localhost):(\d+)"
PROMPT = "Fix toolz.itertoolz.getter and answer with a unified diff.\n"


@dataclass
class _Output:
    token_ids: list[int]
    text: str
    finish_reason: str = "stop"
    logprobs: list | None = None


@dataclass
class _RequestOutput:
    outputs: list[_Output] = field(default_factory=list)


class ScriptedEngine:
    """vLLM's ``generate`` contract (prompt token ids in, one ``RequestOutput`` out) with a
    fixed response per prompt: the response's token ids, then EOS."""

    def __init__(self, tokenizer, responses: dict[str, str]) -> None:
        self.tokenizer = tokenizer
        self.responses = responses

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):
        prompt = self.tokenizer.decode(prompt_token_ids, skip_special_tokens=False)
        text = self.responses[prompt]
        ids = self.tokenizer(text, add_special_tokens=False).input_ids
        ids.append(self.tokenizer.eos_token_id)
        return _RequestOutput([_Output(ids, self.tokenizer.decode(ids))])


def _cases(toolz_task, toolz_patches) -> list[tuple[str, str, str]]:
    """(expected name, label, response) per query: each patch as a fenced diff in the
    response (label = task dir) and as an explicit patch in a JSON label, the missing task,
    a label without a task."""
    cases = []
    for name in PATCH_NAMES:
        patch = toolz_patches[name].decode()
        cases.append((name, str(toolz_task), f"Here is the fix.\n```diff\n{patch}```"))
        cases.append((name, json.dumps({"task": str(toolz_task), "patch": patch,
                                        "rollout_id": f"label-{name}"}), "See the patch."))
    ref = toolz_patches["reference"].decode()
    cases.append(("error", MISSING_TASK, f"```diff\n{ref}```"))
    cases.append(("error", json.dumps({"patch": ref}), "A label without a task."))
    return cases


def _run_executor(remote_rm_url: str, cases) -> list[dict]:
    """One ``SingleTurnAgentExecutor.execute`` per case, concurrently (as OpenRLHF's
    engines run them); each case gets its own prompt so the engine knows its response."""
    tokenizer = tiny_tokenizer()
    executor = agent.SingleTurnAgentExecutor(remote_rm_url)
    prompts = [f"[{i}] {PROMPT}" for i in range(len(cases))]
    engine = ScriptedEngine(tokenizer, {p: c[2] for p, c in zip(prompts, cases, strict=True)})
    params = SimpleNamespace(max_tokens=None, logprobs=None)

    async def run_all():
        return await asyncio.gather(*[
            executor.execute(prompt, label, params, 4096, tokenizer, engine)
            for prompt, (_, label, _) in zip(prompts, cases, strict=True)])

    return asyncio.run(run_all())


def _value(x) -> float:
    """One sample's figure as OpenRLHF turns it into an ``Experience`` field (a tensor of
    the returned value, its first element)."""
    import torch

    return float(torch.tensor(x).flatten()[0]) if not isinstance(x, torch.Tensor) \
        else float(x.flatten()[0])


def _check(outputs, cases, expected):
    """Every query's reward, score and ``proctor_valid`` as expected; all mismatches are
    reported together."""
    wrong = []
    for out, (name, label, _) in zip(outputs, cases, strict=True):
        where = f"{name} (label {label[:50]!r})"
        if out["reward"] is None or not out["extra_logs"]:
            wrong.append(f"{where}: OpenRLHF got no reward (its request or call failed)")
            continue
        got = (_value(out["reward"]), _value(out["scores"]),
               _value(out["extra_logs"]["proctor_valid"]))
        want = (0.0, 0.0, 0.0) if name == "error" else \
            (expected[name], min(1.0, max(0.0, expected[name])), 1.0)
        if got != pytest.approx(want, abs=1e-6):
            wrong.append(f"{where}: (reward, score, valid) {got}, expected {want}")
    assert not wrong, "\n".join(wrong)


def test_query_ends_in_eos_after_the_fence(toolz_patches):
    """The shape OpenRLHF hands the reward function: the closing fence, then EOS."""
    tokenizer = tiny_tokenizer()
    engine = ScriptedEngine(tokenizer, {PROMPT: "```diff\n" +
                                        toolz_patches["reference"].decode() + "```"})
    out = asyncio.run(engine.generate(tokenizer(PROMPT, add_special_tokens=False).input_ids,
                                      None))
    assert out.outputs[0].text.endswith("```" + tokenizer.eos_token)


@pytest.mark.docker
def test_readme_openrlhf_file_mode(toolz_task, toolz_patches, expected_rewards):
    [cmd] = [w for w in shell_words("openrlhf-file") if "openrlhf.cli.train_ppo_ray" in w]
    _check_options(cmd)
    url = option(cmd, REMOTE_URL)
    assert url.endswith("proctor/rl/openrlhf.py"), url
    cases = _cases(toolz_task, toolz_patches)
    outputs = _run_executor(url, cases)
    _check(outputs, cases, expected_rewards)


REMOTE_URL = "--reward.remote_url"


def _train_ppo_ray_options() -> set[str]:
    """The options ``openrlhf.cli.train_ppo_ray`` declares (``parser.add_argument``'s
    first strings), read from the installed module's source: its parser is built under
    ``if __name__ == "__main__"``, so it cannot be imported."""
    import ast
    import importlib.util

    origin = importlib.util.find_spec("openrlhf.cli.train_ppo_ray").origin
    tree = ast.parse(Path(origin).read_text())
    return {a.value for node in ast.walk(tree) if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"
            for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)}


def _check_options(words: list[str]) -> None:
    known = _train_ppo_ray_options()
    assert REMOTE_URL in known and "--data.label_key" in known, sorted(known)[:20]
    used = [w.split("=", 1)[0] for w in words if w.startswith("--")]
    assert used and all(u in known for u in used), [u for u in used if u not in known]


def _start_server(words: list[str]) -> tuple[subprocess.Popen, int]:
    """The snippet's ``proctor serve`` command on a free port (``--port 0``), run with this
    venv's Python; returns the process and the port it printed."""
    assert words[:2] == ["proctor", "serve"], words
    args, skip = [], False
    for i, w in enumerate(words[2:], start=2):
        if skip:
            skip = False
            continue
        if w == "--port":
            skip = True
            continue
        if w.startswith("--port="):
            continue
        args.append(w)
        if w == "--host":
            assert words[i + 1] in ("127.0.0.1", "localhost"), "tests bind loopback only"
    import proctor

    # The server runs the Proctor of this test run (the checkout under test).
    env = dict(os.environ, PYTHONPATH=str(Path(proctor.__file__).resolve().parents[1]))
    proc = subprocess.Popen([sys.executable, "-m", "proctor", "serve", *args, "--port", "0"],
                            stderr=subprocess.PIPE, text=True, env=env)
    lines: list[str] = []
    found = threading.Event()

    def drain() -> None:  # reads stderr to the end, so the server never blocks on it
        for line in proc.stderr:
            lines.append(line)
            if re.search(_ADDRESS, line):
                found.set()

    threading.Thread(target=drain, daemon=True).start()
    deadline = time.monotonic() + 60
    while not found.wait(0.2):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"proctor serve gave no address: {''.join(lines)}")
    return proc, int(next(m for x in lines if (m := re.search(_ADDRESS, x)))[1])


@pytest.mark.docker
def test_readme_openrlhf_http_mode(toolz_task, toolz_patches, expected_rewards):
    commands = shell_words("openrlhf-http")
    [serve] = [w for w in commands if w[:2] == ["proctor", "serve"]]
    [train] = [w for w in commands if "openrlhf.cli.train_ppo_ray" in w]
    _check_options(train)
    url = option(train, REMOTE_URL)
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/get_reward", url), url
    proc, port = _start_server(serve)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as r:
            assert json.load(r)["status"] == "ok"
        cases = _cases(toolz_task, toolz_patches)
        outputs = _run_executor(re.sub(r":\d+/", f":{port}/", url), cases)
        _check(outputs, cases, expected_rewards)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
