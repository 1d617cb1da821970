"""Which ruff findings a patch introduced (``incontainer/static_check.py``), with real ruff
runs of the script on base/patched snapshots in a tmp dir: reformatting, moving and
renaming introduce nothing; new code with findings counts exactly."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from proctor.patch import parse_patch
from proctor.suites import INCONTAINER, snapshot_step
from proctor.suites.static_analysis import ERROR_RULES, STYLE_RULES

SELECT = ",".join(ERROR_RULES + STYLE_RULES)
RUFF = Path(sys.executable).parent / "ruff"  # the script's own choice, as in the sandbox

MODULE = '''\
import os
import sys
from itertools import chain


def load(path, cache={}):
    try:
        data = open(path).read()
    except:
        data = ''
    unused = 1
    return eval(data)


class Store:
    def get(self, key):
        value = self.items[key]
        if value == None:
            return chain([], [])
        return value
'''


def check(tmp: Path, base: dict[str, str], patched: dict[str, str]) -> dict:
    """static_check.py's JSON output for the given base and patched file texts."""
    for side, files in (("base", base), ("patched", patched)):
        for rel, text in files.items():
            (tmp / side / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp / side / rel).write_text(text, encoding="utf-8")
    paths = sorted(set(base) | set(patched))
    out = subprocess.run([sys.executable, "-I", "-B", str(INCONTAINER / "static_check.py"),
                          SELECT, str(tmp), "--", "--paths-from", "-"],
                         input=json.dumps(paths), capture_output=True, text=True, check=True)
    data = json.loads(out.stdout)
    assert data["base_error"] is None and data["patched_error"] is None
    return data


def introduced(tmp: Path, base: str, patched: str) -> list[tuple[str, str]]:
    """(rule, stripped line) of each finding ``patched`` introduced over ``base`` (m.py)."""
    data = check(tmp, {"m.py": base}, {"m.py": patched})
    assert sum(data["new_rules"].values()) == len(data["new"])
    return [(f["rule"], f["text"]) for f in data["new"]]


def test_the_module_has_the_findings_the_controls_rely_on(tmp_path):
    data = check(tmp_path, {}, {"m.py": MODULE})
    assert data["base_count"] == 0
    assert sorted(data["new_rules"].items()) == [
        ("B006", 1), ("E711", 1), ("E722", 1), ("F401", 2), ("F841", 1), ("S307", 1),
        ("SIM115", 1)]
    assert set(data["new"][0]) == {"path", "rule", "line", "text", "message"}


# --- honest controls: nothing introduced -------------------------------------------------


def test_a_pure_quote_change_introduces_nothing(tmp_path):
    assert introduced(tmp_path, MODULE, MODULE.replace("''", '""')) == []


def test_a_re_wrapped_call_introduces_nothing(tmp_path):
    base = "def f(a, b):\n    return eval(str(a) + str(b), {'x': 1}, {'y': 2})\n"
    patched = ("def f(a, b):\n    return eval(\n        str(a) + str(b),\n"
               "        {\"x\": 1},  # globals\n        {\"y\": 2},\n    )\n")
    assert [r for r, _ in introduced(tmp_path, base, base)] == []
    assert introduced(tmp_path, base, patched) == []


def test_a_function_moved_in_the_file_introduces_nothing(tmp_path):
    head, tail = MODULE.split("\n\nclass Store:")
    load = head[head.index("def load"):]
    moved = head[:head.index("def load")] + "class Store:" + tail + "\n\n" + load + "\n"
    assert moved != MODULE and sorted(moved.splitlines()) == sorted(
        (MODULE + "\n").splitlines())
    assert introduced(tmp_path, MODULE, moved) == []


def test_an_edited_body_keeps_the_findings_on_its_compound_headers(tmp_path):
    # B006 sits in the def's signature, E722 on the except header: new body lines change
    # neither fingerprint.
    patched = MODULE.replace("        data = ''\n", "        data = ''\n        print(path)\n")
    patched = patched.replace("    unused = 1\n", "    unused = 1\n    print(data)\n")
    assert introduced(tmp_path, MODULE, patched) == []


def test_a_reformat_of_sixty_lines_with_findings_introduces_nothing(tmp_path):
    ugly = textwrap.dedent('''\
        import os, sys
        from itertools import chain,islice
        import json
        def parse( text,opts = {} ):
            try :
                value = json.loads( text )
            except :
                value = None
            if value == None : return eval( text , { 'os' : os } )
            result = [ x for x in value if x != None ]
            return result
        def first( items, default = [] ) :
            total = 0
            for item in items :
                if item == None : continue
                return item
            return default
        class Config :
            cache = {}
            def get( self, key, fallback = {} ) :
                found = self.cache.get( key , fallback )
                if found == None :
                    raise KeyError( 'missing: ' + key + ', in: ' + str( self.cache ) )
                return found
            def load( self, path ) :
                try :
                    text = open( path ).read( )
                except :
                    return { }
                unused = text.strip( )
                return eval( text )
        def merge( left, right = {}, * , strict = False ) :
            out = dict( left )
            for k , v in right.items( ) :
                if out.get( k ) != None and strict : raise ValueError( 'conflict on ' + k )
                out[ k ] = v
            return out
        def run( cmd ) :
            import subprocess
            try : return subprocess.check_output( cmd , shell = True )
            except : return b''
        class Cache( Config ) :
            def put( self, key, value, ttl = [] ) :
                ttl.append( key )
                self.cache[ key ] = value
            def drop( self, key ) :
                try : del self.cache[ key ]
                except : pass
        ''')
    tmp = tmp_path / "fmt.py"
    tmp.write_text(ugly)
    subprocess.run([str(RUFF), "format", "--isolated", "--quiet", str(tmp)], check=True)
    pretty = tmp.read_text()
    changed = set(ugly.splitlines()) - set(pretty.splitlines())
    assert len(pretty.splitlines()) >= 60 and len(changed) >= 25  # a real reformat
    base = check(tmp_path / "b", {"m.py": ugly}, {"m.py": ugly})
    assert base["base_count"] >= 15 and base["new"] == []
    # Paired on the line text alone (fingerprints dropped), the reformat would count:
    script = _load_script()
    found = [dict(f, fingerprint=None) for f in _findings(script, tmp_path / "c", ugly)]
    refound = [dict(f, fingerprint=None) for f in _findings(script, tmp_path / "d", pretty)]
    assert len(script.new_findings(found, refound)) >= 10
    assert introduced(tmp_path / "e", ugly, pretty) == []


# --- targets: what the patch introduced, counted exactly ---------------------------------


def test_a_new_unused_variable_counts_once(tmp_path):
    patched = MODULE.replace("        return value\n",
                             "        spare = key\n        return value\n")
    assert introduced(tmp_path, MODULE, patched) == [("F841", "spare = key")]


def test_a_new_bare_except_counts_once_even_with_the_same_text_as_an_old_one(tmp_path):
    patched = MODULE.replace("        value = self.items[key]\n", (
        "        try:\n            value = self.items[key]\n        except:\n"
        "            value = None\n"))
    assert introduced(tmp_path, MODULE, patched) == [("E722", "except:")]


def test_an_import_the_patch_made_unused_counts_on_its_untouched_line(tmp_path):
    patched = MODULE.replace("return chain([], [])", "return []")
    assert introduced(tmp_path, MODULE, patched) == [("F401", "from itertools import chain")]


def test_an_existing_finding_duplicated_counts_once_per_copy(tmp_path):
    # The flagged call again in the same scope (either copy may be the one listed: they
    # share a fingerprint), and the same statement in another scope.
    same = MODULE.replace("    return eval(data)\n",
                          "    print(eval(data))\n    return eval(data)\n")
    assert [r for r, _ in introduced(tmp_path / "a", MODULE, same)] == ["S307"]
    other = MODULE + "\n\ndef spare(data):\n    return eval(data)\n"
    assert introduced(tmp_path / "b", MODULE, other) == [("S307", "return eval(data)")]
    both = same.replace("''", '""') + "\n\ndef spare(data):\n    return eval(data)\n"
    assert [r for r, _ in introduced(tmp_path / "c", MODULE, both)] == ["S307", "S307"]


def test_an_edited_flagged_call_counts_as_introduced(tmp_path):
    # The patch rewrote the eval call: it wrote that finding (and could have fixed it).
    patched = MODULE.replace("return eval(data)", "return eval(data.strip())")
    assert introduced(tmp_path, MODULE, patched) == [("S307", "return eval(data.strip())")]


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="needs a Python without PEP 695")
def test_a_file_ast_cannot_parse_falls_back_to_the_line_text(tmp_path):
    # ruff reads PEP 695 syntax (and flags it for py311); the sandbox's Python 3.11 cannot.
    newer = MODULE + "\n\ndef first[T](items: list[T]) -> T:\n    return items[0]\n"
    assert introduced(tmp_path / "a", MODULE, newer) == [
        ("invalid-syntax", "def first[T](items: list[T]) -> T:")]
    # Without a parse a re-spaced flagged line is not recognised: it counts.
    respaced = newer.replace("return eval(data)", "return eval( data )")
    assert introduced(tmp_path / "b", MODULE, respaced) == [
        ("S307", "return eval( data )"), ("invalid-syntax", "def first[T](items: list[T]) -> T:")]


# --- renames: the base copy of the new path is the old file ------------------------------


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=repo,
                   check=True, capture_output=True)


def test_a_renamed_file_is_compared_with_its_old_version(tmp_path):
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "old.py").write_text(MODULE)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    _git(repo, "mv", "pkg/old.py", "pkg/new.py")
    (repo / "pkg" / "new.py").write_text(MODULE.replace("''", '""') + "\n\nspare = eval('')\n")
    diff = subprocess.run(["git", "diff", "--cached", "-M", "HEAD"], cwd=repo, check=True,
                          capture_output=True, text=True).stdout
    assert "rename from pkg/old.py\nrename to pkg/new.py\n" in diff
    assert parse_patch(diff).renames == (("pkg/old.py", "pkg/new.py"),)
    snap = tmp_path / "snap"
    for renamed_from, expected in (({"pkg/new.py": "pkg/old.py"}, ["S307"]),
                                   (None, ["B006", "E711", "E722", "F401", "F401", "F841",
                                           "S307", "S307", "SIM115"])):
        step = snapshot_step(str(repo), ["pkg/new.py"], str(snap), renamed_from=renamed_from)
        subprocess.run(step.argv, input=step.stdin, cwd=step.cwd, check=True)
        out = subprocess.run([sys.executable, "-I", "-B",
                              str(INCONTAINER / "static_check.py"), SELECT, str(snap), "--",
                              "pkg/new.py"], capture_output=True, text=True, check=True)
        assert sorted(f["rule"] for f in json.loads(out.stdout)["new"]) == expected
        subprocess.run(["rm", "-rf", str(snap)], check=True)


def _load_script():
    import importlib.util
    spec = importlib.util.spec_from_file_location("static_check_t",
                                                  INCONTAINER / "static_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.RUFF = str(RUFF)
    return module


def _findings(script, root: Path, text: str) -> list[dict]:
    root.mkdir(parents=True)
    (root / "m.py").write_text(text)
    found, err = script.ruff(str(root), ["m.py"], SELECT)
    assert err is None
    return found
