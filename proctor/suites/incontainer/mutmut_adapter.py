"""The one place Proctor touches mutmut (pinned 3.8.1 in proctor/sandbox/toolchain.py).

mutmut has no diff mode. The narrowest hook is the ``covered_lines`` parameter of
``mutmut.mutation.file_mutation.create_mutations(filename, code, covered_lines,
coverage_excluded_lines)``: mutmut's own "mutate only covered lines" filter, which skips
every node whose first line is not in the set. We pass the lines the patch added or
changed, then let ``combine_mutations_to_source`` write mutmut's trampolined module, so
mutmut generates and names every mutant. At test time the active mutant is set in the
trampoline's process-local slot (``trampoline._mutant_under_test``), never in the
``MUTANT_UNDER_TEST`` environment variable, so code that reads the environment sees nothing.
``tests/test_mutation.py`` fails loudly when an upgrade moves any of these.

Run as ``python -I -B mutmut_adapter.py generate SPEC.json`` (root, in the throw-away
copy; no code of the repo runs): SPEC is ``{"root": dir, "files": {path: [line, ...]}}``;
each file is rewritten in place with its mutants and one JSON object is printed:
``{"mutants": [{"name", "path", "line", "function", "diff"}], "errors": [str]}`` where
``name`` is the value the trampoline dispatches on (``module.x_func__mutmut_3``) and
``function`` the trampoline's coverage key (``module.x_func``).

``python -I -B mutmut_adapter.py serve``: the same generation as a long-lived process on the
host (:mod:`proctor.suites.mutant_generator`), sources in and rewritten sources out, one
JSON line each way (see :func:`_serve`), so mutmut and libcst load once per process, not
once per rollout. It only parses: no code of the repo runs there either.
"""

from __future__ import annotations

import ast
import difflib
import io
import json
import os
import re
import sys
import tempfile
import tokenize

from mutmut import configuration
from mutmut.mutation import trampoline
from mutmut.mutation.trampoline_templates import mangle_function_name, trampoline_imports
from mutmut.state import state

# libcst and mutmut's generator load in 0.4 s: imported by generate() only, so the test
# runner (which needs activate / take_hits) does not pay for them.

_PRAGMA = re.compile(r"no\s+mutate")


def use_neutral_config() -> None:
    """Load mutmut's configuration from an empty directory of ours (no patterns, no
    ``[tool.mutmut]`` of the repo), so nothing in the repo can steer what is mutated."""
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "pyproject.toml"), "w") as fh:
            fh.write('[tool.mutmut]\nsource_paths = ["."]\n')
        os.chdir(tmp)
        try:
            configuration.reset_config()
            configuration.config()
        finally:
            os.chdir(here)


def strip_pragmas(code: str, lines: set[int]) -> str:
    """Blank ``# pragma: no mutate`` comments on ``lines`` (the patch's own), keeping columns."""
    out = code.splitlines(keepends=True)
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError):
        return code
    for tok in tokens:
        row = tok.start[0]
        if tok.type == tokenize.COMMENT and row in lines and _PRAGMA.search(tok.string):
            line = out[row - 1]
            c0, c1 = tok.start[1], tok.end[1]
            out[row - 1] = line[:c0] + "#" + " " * (c1 - c0 - 1) + line[c1:]
    return "".join(out)


def module_name(path: str) -> str:
    """Import name of a repo-relative ``.py`` path (``src/`` layout stripped, as mutmut does)."""
    parts = path[:-3].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    if parts and parts[0] == "src":
        parts = parts[1:]
    return ".".join(parts)


def _owners(module):
    """Top-level functions and methods of top-level classes -> class name (mutmut's scope)."""
    import libcst as cst

    owners = {}
    for stmt in module.body:
        if isinstance(stmt, cst.FunctionDef):
            owners[stmt] = None
        elif isinstance(stmt, cst.ClassDef) and isinstance(stmt.body, cst.IndentedBlock):
            for meth in stmt.body.body:
                if isinstance(meth, cst.FunctionDef):
                    owners[meth] = stmt.name.value
    return owners


def _diff(path: str, module, func, start: int, mutated) -> str:
    before = module.code_for_node(func.with_changes(leading_lines=[])).splitlines()
    after = module.code_for_node(mutated.with_changes(leading_lines=[])).splitlines()
    out = [f"--- a/{path}", f"+++ b/{path}"]
    for line in list(difflib.unified_diff(before, after, n=1, lineterm=""))[2:]:
        m = re.match(r"@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@", line)
        if m:
            line = (f"@@ -{int(m[1]) + start - 1}{m[2] or ''} "
                    f"+{int(m[3]) + start - 1}{m[4] or ''} @@")
        out.append(line)
    return "\n".join(out)


def touched_statements(code: str, lines: set[int]) -> list[tuple[int, int]]:
    """1-based inclusive line ranges (decorators included) of the top-level ``def`` and
    ``class`` statements holding any of ``lines``: the only places mutmut makes mutants."""
    spans = []
    for node in ast.parse(code).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            if any(start <= n <= node.end_lineno for n in lines):
                spans.append((start, node.end_lineno))
    return spans


def generate(path: str, code: str, lines: set[int]) -> tuple[str, list[dict]]:
    """Mutants of ``code`` (the file at repo path ``path``) on ``lines`` only.

    Each top-level statement holding a changed line goes through mutmut on its own (its
    text alone, line numbers shifted back), and mutmut's trampolined rendering replaces it
    in the file; mutmut's import goes before the first one. Parsing only those statements
    keeps generation proportional to the code the patch touched, not to the file.

    Returns (the source to write in place of the file, one dict per mutant as in the module
    docstring). Raises RuntimeError when mutmut produced a mutant off ``lines`` or renders
    or names its mutants differently from what we expect (the hook broke).
    """
    code = strip_pragmas(code, lines)
    src = code.splitlines(keepends=True)
    out, infos, done = [], [], 0
    for start, end in touched_statements(code, lines):
        text = "".join(src[start - 1:end])
        local = {n - start + 1 for n in lines if start <= n <= end}
        body, found = _generate_statement(path, text, local, start - 1)
        out.append("".join(src[done:start - 1]))
        if found and not infos:
            out.append(trampoline_imports.strip() + "\n")
        out.append(body if found else text)
        infos.extend(found)
        done = end
    out.append("".join(src[done:]))
    return "".join(out), infos


def _generate_statement(path: str, text: str, lines: set[int], shift: int
                        ) -> tuple[str, list[dict]]:
    from libcst.metadata import MetadataWrapper, PositionProvider
    from mutmut.mutation.file_mutation import (
        combine_mutations_to_source,
        create_mutations,
        deep_replace,
    )

    module, mutations, ignored_classes, ignored_functions = create_mutations(
        path, text, covered_lines=set(lines))
    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    owners = _owners(module)
    modname = module_name(path)
    kept, infos, counter = [], [], {}
    for mut in mutations:
        func = mut.contained_by_top_level_function
        if func not in owners:
            continue  # not in a function: mutmut has no trampoline for it
        line = positions[mut.original_node].start.line
        if line not in lines:
            raise RuntimeError(f"mutmut hook broken: mutant on line {line + shift} of {path}, "
                               f"asked for {sorted(n + shift for n in lines)}")
        mangled = mangle_function_name(name=func.name.value, class_name=owners[func])
        counter[func] = counter.get(func, 0) + 1
        kept.append(mut)
        mutated = deep_replace(func, mut.original_node, mut.mutated_node)
        infos.append({
            "name": f"{modname}.{mangled}__mutmut_{counter[func]}", "path": path,
            "line": line + shift, "function": f"{modname}.{mangled}",
            "diff": _diff(path, module, func, positions[func].start.line + shift, mutated),
        })
    if not kept:
        return text, []
    result = combine_mutations_to_source(module, kept, ignored_classes, ignored_functions)
    expected = {i["name"].rpartition(".")[2] for i in infos}
    if set(result.mutant_names) != expected:
        raise RuntimeError(f"mutmut hook broken: mutmut named {sorted(result.mutant_names)}, "
                           f"expected {sorted(expected)}")
    head, sep, body = result.code.partition(trampoline_imports.strip())
    if not sep or head.strip():
        raise RuntimeError("mutmut hook broken: the rendering does not start with "
                           f"{trampoline_imports.strip()!r}")
    return body.lstrip("\n"), infos


def activate(name: str | None) -> None:
    """Make ``name`` (``module.x_func__mutmut_N``, ``"stats"``, or None for the original
    code) the active mutant of this process, without touching the environment."""
    os.environ.pop("MUTANT_UNDER_TEST", None)
    trampoline._mutant_under_test = name


def take_hits() -> set[str]:
    """Coverage keys (``module.x_func``) the trampolines recorded in ``"stats"`` mode since
    the last call; clears them."""
    hits = set(state()._stats)
    state()._stats.clear()
    return hits


def generate_all(sources: dict[str, tuple[str, set[int]]]
                 ) -> tuple[dict[str, str], list[dict], list[str]]:
    """Mutants of every file: ``sources`` maps repo path -> (code, changed lines).

    Returns (path -> rewritten source, only for files that got mutants; the mutants, as
    :func:`generate` gives them, in path order; one message per file that could not be
    parsed). Raises RuntimeError when the mutmut hook broke (see :func:`generate`)."""
    rewritten, mutants, errors = {}, [], []
    for path, (code, lines) in sorted(sources.items()):
        try:
            new_code, infos = generate(path, code, set(lines))
        except RuntimeError:
            raise  # the hook broke: fail loudly (the step is then degraded)
        except Exception as exc:  # noqa: BLE001 - unparsable: no mutants there
            errors.append(f"{path}: {type(exc).__name__}: {exc}")
            continue
        if infos:
            rewritten[path] = new_code
        mutants.extend(infos)
    return rewritten, mutants, errors


def _generate_spec(spec_path: str) -> int:
    with open(spec_path, encoding="utf-8") as fh:
        spec = json.load(fh)
    sources, errors = {}, []
    for path, lines in sorted(spec["files"].items()):
        try:
            with open(os.path.join(spec["root"], path), encoding="utf-8") as fh:
                sources[path] = (fh.read(), set(lines))
        except (OSError, UnicodeDecodeError) as exc:  # unreadable: no mutants there
            errors.append(f"{path}: {type(exc).__name__}: {exc}")
    rewritten, mutants, more = generate_all(sources)
    for path, code in rewritten.items():
        with open(os.path.join(spec["root"], path), "w", encoding="utf-8") as fh:
            fh.write(code)
    print(json.dumps({"mutants": mutants, "errors": sorted(errors + more)}))
    return 0


def _serve(stdin, stdout) -> int:
    """One request a line on ``stdin``: ``{"files": {path: {"code": str, "lines": [int]}}}``;
    one answer a line on ``stdout``: ``{"files": {path: rewritten}, "mutants": [...],
    "errors": [...]}``, or ``{"fatal": why}`` when the hook broke or the request is not
    understood. A ``{"ready": versions}`` line comes first, once mutmut is loaded. Ends at
    the end of ``stdin``."""
    from importlib.metadata import version

    import mutmut.mutation.file_mutation  # noqa: F401 - loaded once, before the first request

    versions = {name: version(name) for name in ("mutmut", "libcst")}
    stdout.write(json.dumps({"ready": versions}) + "\n")
    stdout.flush()
    for line in stdin:
        try:
            files = json.loads(line)["files"]
            sources = {p: (f["code"], set(f["lines"])) for p, f in files.items()}
            rewritten, mutants, errors = generate_all(sources)
            answer = {"files": rewritten, "mutants": mutants, "errors": errors}
        except Exception as exc:  # noqa: BLE001 - answered, never a dead server
            answer = {"fatal": f"{type(exc).__name__}: {exc}"}
        stdout.write(json.dumps(answer) + "\n")
        stdout.flush()
    return 0


def main(argv: list[str]) -> int:
    if argv == ["serve"]:
        use_neutral_config()
        return _serve(sys.stdin, sys.stdout)
    if argv[:1] != ["generate"] or len(argv) != 2:
        print("usage: mutmut_adapter.py generate SPEC.json | serve", file=sys.stderr)
        return 2
    use_neutral_config()
    return _generate_spec(argv[1])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
