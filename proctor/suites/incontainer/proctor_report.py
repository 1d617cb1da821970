"""Proctor's pytest plugin: streams one record per event to the supervisor of run_pytest.py.

Built by :func:`make_plugin` *before* ``pytest.main`` (so before any code of the repository
runs) and handed to pytest as an object; each record is a line ``NONCE JSON`` written to the
verdict channel (an inherited socket at an unpredictable fd, one record a message).
Records, in order:

* ``{"k": "started"}``: the plugin exists (no record at all means a harness fault);
* ``{"k": "collect", "id"}`` when a collector starts, ``{"k": "collected", "id"}`` when
  it ends (with ``"failed": true`` and a ``collection_error`` record when it failed): the
  supervisor knows which module an import that hangs or kills the process belongs to;
* ``{"k": "items", "ids", "last"}``: the test ids this session will run, in order, once
  collection is done (in several records for a big suite, the last with ``"last": true``);
* ``{"k": "start", "id"}``: a test begins (setup, call, teardown follow): the supervisor
  times each test from here and knows which one a hang or a dead process belongs to;
* ``{"k": "raw", "id", "v"}``: the verdict of the test function's own call, taken inside a
  wrapper of the test function (``v``: passed, failed, skipped), below every hook dispatch
  and independent of pytest's reports;
* ``{"k": "test", "id", "outcome", "duration"}``: the outcome from pytest's reports
  (passed, failed, error, skipped, xfailed, xpassed, timeout; duration in seconds). The
  worst of a test's reports wins: a failed subtest (``self.subTest``, the ``subtests``
  fixture) fails its test even when the test's own final report says passed;
* ``{"k": "collection_error", "id"}``;
* ``{"k": "tamper", "why"}``: pytest's runner rewired under the tests (a function or
  method of ``_pytest``/``pluggy``/``pytest_timeout``/this plugin replaced, the plugin
  manager's hook execution wrapped, a test item's ``runtest`` or test function swapped, a
  hook implementation added, removed or replaced); run_pytest.py's audit hook sends the
  same kind when code the patch touched reaches into the harness (``gc.get_objects``,
  ``sys.settrace``, ...);
* ``{"k": "session", "exitstatus", "collected"}``: the last record.

A later session of the same suite (run after a test hung or the process died) gets
``skip``: the test ids already judged are deselected and the modules that already failed to
collect are not collected again, so the session runs only what has no verdict yet.

A differential run (``proctor.suites.variants``) names its variants in ``skip["variant"]``;
the plugin does their part inside pytest: ``environment``: pytest never sets
``PYTEST_CURRENT_TEST`` and ``PYTEST_VERSION`` is gone before any conftest loads; ``cwd``:
once collection is done the tests run in an empty directory of their own; ``state``: the
tests run in reverse order, each plain test function's call :data:`STATE_REPEATS` times in
a row and more while they are fast (:func:`_repeated_call`; its verdict fails when any
call fails); ``frame``: each plain test function runs as a renamed copy in a thread of its
own (:func:`_disguised`: no test name, file, source line, local name or module global
shows in its frame, no frame of pytest or the harness on its stack); ``modules``: pytest's,
pluggy's and the harness's modules are out of ``sys.modules`` during each test's call
(:func:`_runner_modules_hidden`) and while the modules of the patch's files are imported,
before pytest starts (:func:`import_unobserved`); ``module_name``: once collection is done
the modules of the tests are in ``sys.modules`` under plain names of their own
(:func:`rename_test_modules`). (The ``path`` variant is the host's: it runs the tests with
the repository's directory renamed.)

What is checked when: the runner's call path (``_pytest.runner``, ``_pytest.python``, ...,
``pluggy``) and the item before every test call; everything, builtins included, when
collection ends and when the session ends (after teardowns: a test's monkeypatch of
``builtins.input`` is undone by then).
"""

import builtins
import contextvars
import functools
import json
import os
import sys
import threading
import time
import types

import pluggy
import pytest

#: Modules whose functions and classes must not change under the tests (checked per call).
CALL_PATH = ("_pytest.runner", "_pytest.python", "_pytest.main", "_pytest.reports",
             "_pytest.nodes", "_pytest.skipping", "_pytest.outcomes", "_pytest.unittest",
             "_pytest.fixtures", "_pytest.python_api", "_pytest.raises", "_pytest.assertion",
             "_pytest.assertion.rewrite", "_pytest.assertion.util", "pluggy._hooks",
             "pluggy._callers", "pluggy._manager", "pluggy._result", "pytest",
             "pytest_timeout", __name__)
#: Hooks whose implementations decide a verdict (checked per call).
VERDICT_HOOKS = ("pytest_runtest_protocol", "pytest_runtest_setup", "pytest_runtest_call",
                 "pytest_runtest_teardown", "pytest_pyfunc_call", "pytest_runtest_makereport",
                 "pytest_runtest_logreport", "pytest_report_teststatus",
                 "pytest_runtest_logfinish")
_CALLABLE = (types.FunctionType, types.BuiltinFunctionType, type, property, classmethod,
             staticmethod, types.MethodDescriptorType, types.WrapperDescriptorType)


def _bindings(names):
    """[(label, namespace, key, value)] for every function or class of the modules ``names``
    and every callable attribute of the classes they define (identity is what is compared)."""
    out = []
    for name in names:
        mod = sys.modules.get(name)
        if mod is None:
            continue
        ns = vars(mod)
        for key, value in list(ns.items()):
            if not isinstance(value, _CALLABLE) or (name == "builtins" and key == "_"):
                continue
            out.append((f"{name}.{key}", ns, key, value))
            if isinstance(value, type) and value.__module__ == name != "builtins":
                cls_ns = vars(value)
                out.extend((f"{name}.{key}.{k}", cls_ns, k, v)
                           for k, v in list(cls_ns.items()) if isinstance(v, _CALLABLE))
    return out


def _changed(bindings):
    """[(label, current value)] of the bindings that no longer hold their value."""
    return [(label, ns.get(key)) for label, ns, key, value in bindings
            if ns.get(key) is not value]


def _instance_bindings(label, obj):
    """Like :func:`_bindings`, for the callable attributes of one object's ``__dict__``."""
    ns = getattr(obj, "__dict__", None)
    if not isinstance(ns, dict):
        return []
    return [(f"{label}.{k}", ns, k, v) for k, v in list(ns.items()) if callable(v)]


def _pytests_own(value):
    """A value pytest's own plugins install at configure time (legacypath patches Config
    and Node this way)."""
    module = getattr(value, "__module__", None) or ""
    return module.startswith(("_pytest.", "pluggy.", "pytest_timeout"))


def _all_modules():
    prefixes = ("_pytest.", "pluggy.")
    return sorted(n for n in list(sys.modules) if n.startswith(prefixes)
                  or n in ("pytest", "pluggy", "pytest_timeout", "builtins", __name__))


def make_plugin(fd, nonce, repo, changed=None, skip=None):
    """The plugin object for ``pytest.main(plugins=[...])``, writing to ``fd``. ``repo``:
    the directory of the code under test; ``changed``: the repo-relative paths the patch
    touched (a verdict hook implemented there is foreign), or None for "anywhere in the
    repo but a conftest.py"; ``skip``: ``{"ids": [...], "paths": [...]}``, test ids to
    deselect and collector ids (paths relative to the rootdir) not to collect, and
    optionally ``"only"`` (run no other test ids) with ``"keep"`` (but every test of these
    files, absolute paths: the tripwires), and ``"pristine"``: absolute path -> sha256 (hex)
    of the hidden test files as the harness placed them; when collection ends and when
    the session ends each must still hold those bytes, every collected test module among
    them must have been imported from its own path, and a module in ``sys.modules`` under
    the dotted name of one of them (its package chain on disk) must come from that file,
    else a ``tamper`` record."""
    write, dumps, tag = os.write, json.dumps, nonce.encode() + b" "

    def send(obj):
        data = tag + dumps(obj).encode() + b"\n"
        while data:
            data = data[write(fd, data):]

    root = os.path.realpath(repo) + os.sep
    suspects = None if changed is None else {os.path.realpath(root + p) for p in changed}
    plugin = _ReportPlugin(send, root, suspects, (write, fd, tag), skip)
    send({"k": "started"})
    return plugin


def _is_timeout(report):
    text = getattr(report, "longreprtext", "") or ""
    return "Timeout (" in text or "Failed: Timeout" in text


def _is_foreign(function, plugin, repo, suspects):
    """A hook implementation whose code lives in a file the patch touched (``suspects``,
    absolute paths), or, when they are not known (None), anywhere in the repository but a
    conftest.py (a patch may not add or edit one: the integrity phase refuses it). Pytest's
    plugins, pytest-timeout, this plugin, the image's packages and a project's own pristine
    pytest plugin are not."""
    code = getattr(function, "__code__", None)
    path = code.co_filename if code is not None else getattr(
        sys.modules.get(getattr(plugin, "__module__", None) or getattr(plugin, "__name__", "")),
        "__file__", None)
    if not path:
        return False
    path = os.path.realpath(path)
    if suspects is not None:
        return path in suspects
    return path.startswith(repo) and os.path.basename(path) != "conftest.py"


def _raw_call(state, *args, **kwargs):
    """The test function's stand-in for one call (bound to ``state`` with
    :class:`types.MethodType`): runs the original and writes its raw verdict itself. Nothing
    on this path can be rebound without the runner's audit hook seeing it: ``state`` is a
    tuple (the original, the three pre-built records, ``os.write``, the channel's fd, the
    skip exception class), the bound method's attributes are read-only, this function is a
    module binding checked by identity and its code object is guarded. No instance
    attribute, closure cell or ``json`` global is read (a ``_send`` shadowed on the
    plugin instance, found through frames, could rewrite every raw verdict to passed)."""
    original, passed, failed, skipped, write, fd, skip = state
    try:
        result = original(*args, **kwargs)
    except BaseException as exc:
        data = skipped if isinstance(exc, skip) else failed
        while data:
            data = data[write(fd, data):]
        raise
    data = passed
    while data:
        data = data[write(fd, data):]
    return result


#: How often the ``state`` variant calls each test function: at least
#: :data:`STATE_REPEATS` times, then in doublings up to :data:`STATE_MOST_REPEATS` while the
#: calls so far took less than :data:`STATE_BUDGET_S` seconds (a fast test is called a
#: thousand times, a slow one sixteen) (proctor.suites.variants holds the same numbers).
STATE_REPEATS = 16
STATE_MOST_REPEATS = 1024
STATE_BUDGET_S = 0.1


def _repeated_call(state, *args, **kwargs):
    """The ``state`` variant's test function (bound to ``original``): the original called
    with the same arguments :data:`STATE_REPEATS` times, then in doublings up to
    :data:`STATE_MOST_REPEATS` while the calls took less than :data:`STATE_BUDGET_S`; the
    last call's result. A call that raises ends it (the test fails)."""
    original = state
    clock = time.perf_counter
    start = clock()
    done, goal = 0, STATE_REPEATS
    while True:
        while done < goal - 1:
            original(*args, **kwargs)
            done += 1
        if goal >= STATE_MOST_REPEATS or clock() - start >= STATE_BUDGET_S:
            return original(*args, **kwargs)
        goal *= 2


#: What the ``frame`` variant shows of a test function's frame instead of its own name and
#: file; its lines are shifted by :data:`FRAME_LINE_SHIFT` (past any file's end: the source
#: read through the frame, ``linecache`` or ``inspect.getsource``, is gone).
FRAME_NAME = "case"
FRAME_FILE = "/usr/local/lib/case.py"
FRAME_LINE_SHIFT = 10_000_000
_ARGS_FLAGS = 0x04 | 0x08  # CO_VARARGS | CO_VARKEYWORDS
_NOT_PLAIN = 0x20 | 0x80 | 0x100 | 0x200  # generator, coroutine, iterable coroutine, async gen


def _renamed_code(code, params, top):
    """``code`` (and every code object nested in it) with its file and lines moved
    (:data:`FRAME_FILE`, :data:`FRAME_LINE_SHIFT`) and its local variables renamed (cell and
    free variables keep their names: nested code finds them by name); ``params``: the
    parameters too; ``top``: the name :data:`FRAME_NAME` too (a nested function keeps its
    name: ``__name__`` comes from it)."""
    n_args = code.co_argcount + code.co_kwonlyargcount + \
        bin(code.co_flags & _ARGS_FLAGS).count("1")
    shared = set(code.co_cellvars) | set(code.co_freevars)
    names = tuple(name if name in shared or (i < n_args and not params) else f"v{i}_"
                  for i, name in enumerate(code.co_varnames))
    consts = tuple(_renamed_code(c, False, False) if isinstance(c, types.CodeType) else c
                   for c in code.co_consts)
    changes = {"co_varnames": names, "co_consts": consts, "co_filename": FRAME_FILE,
               "co_firstlineno": code.co_firstlineno + FRAME_LINE_SHIFT}
    if top:
        changes.update(co_name=FRAME_NAME, co_qualname=FRAME_NAME)
    return code.replace(**changes)


def _codes(code):
    """``code`` and every code object nested in it (comprehensions, lambdas, classes)."""
    out = {code}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            out |= _codes(const)
    return frozenset(out)


def _own_globals(module_globals, codes):
    """The globals of a test function's copy in the ``frame`` variant: a ``dict`` that
    answers a look-up (``LOAD_GLOBAL``, a subscript, ``get``, ``in``) only when the code
    asking is one of ``codes`` (the copy's own) and then from ``module_globals``; to any
    other code (a frame read of the caller's ``f_globals``, for the expected values the
    test module holds) it holds only ``__builtins__``, the module's ``__name__`` (what
    ``collections.namedtuple`` reads of its caller, as in any run) and what the copy
    assigns to a ``global`` name (CPython stores those with the dict C API)."""
    frame = sys._getframe
    own = dict.__contains__
    read = dict.__getitem__
    look = dict.get

    class Globals(dict):
        __slots__ = ()

        def __getitem__(self, name):
            if own(self, name) or frame(1).f_code not in codes:
                return read(self, name)
            return module_globals[name]

        def get(self, name, default=None):
            if own(self, name) or frame(1).f_code not in codes:
                return look(self, name, default)
            return module_globals.get(name, default)

        def __contains__(self, name):
            return own(self, name) or (frame(1).f_code in codes and name in module_globals)

    for name in ("__getitem__", "get", "__contains__"):  # no harness file on a traceback
        setattr(Globals, name, _neutral(vars(Globals)[name], name))
    Globals.__module__, Globals.__qualname__, Globals.__name__ = FRAME_NAME, "dict", "dict"
    globals_ = Globals()
    dict.__setitem__(globals_, "__builtins__", module_globals.get("__builtins__", builtins))
    dict.__setitem__(globals_, "__name__", module_globals.get("__name__", FRAME_NAME))
    return globals_


def _disguised(original):
    """The ``frame`` variant's test function: ``original`` (a plain function or a bound
    method of one) as a copy whose code (:func:`_renamed_code`) runs on its module's globals
    as only its own code sees them (:func:`_own_globals`), with the same defaults and
    closure, called with its parameters by position (they are renamed too,
    unless it takes ``*args``, ``**kwargs`` or keyword-only ones), in a thread of its own
    (:func:`_in_fresh_thread`: none of pytest's, pluggy's or the harness's frames is on its
    stack). Anything else (a coroutine, a generator, a callable object) is returned as it
    is."""
    func = getattr(original, "__func__", original)
    bound = getattr(original, "__self__", None) if func is not original else None
    if not isinstance(func, types.FunctionType) or func.__code__.co_flags & _NOT_PLAIN:
        return original
    code = func.__code__
    plain = not code.co_kwonlyargcount and not code.co_flags & _ARGS_FLAGS
    renamed = _renamed_code(code, plain, True)
    copy = types.FunctionType(renamed, _own_globals(func.__globals__, _codes(renamed)),
                              FRAME_NAME, func.__defaults__, func.__closure__)
    copy.__kwdefaults__ = func.__kwdefaults__
    if not plain:
        call = copy if bound is None else types.MethodType(copy, bound)
    else:
        names = code.co_varnames[:code.co_argcount]
        given = (bound,) if bound is not None else ()
        defaults = dict(zip(names[len(names) - len(func.__defaults__ or ()):],
                            func.__defaults__ or (), strict=True))
        call = types.MethodType(_POSITIONAL_CALL, (copy, given, names, defaults))
    return types.MethodType(_in_fresh_thread, call)


def _positional_call(state, *args, **kwargs):
    """Calls ``copy`` (bound to ``(copy, given, names, defaults)``) with ``given`` and
    ``args`` first and every further parameter of ``names`` by position, from ``kwargs`` or
    its default (pytest passes a test's fixtures and parameters by name)."""
    copy, given, names, defaults = state
    first = [*given, *args]
    rest = [kwargs.pop(n) if n in kwargs else defaults[n] for n in names[len(first):]]
    if kwargs:
        raise TypeError(f"unexpected arguments {sorted(kwargs)}")
    return copy(*first, *rest)


def _thread_body(box, call, args, kwargs):
    """Runs ``call(*args, **kwargs)`` and appends ``(True, result)`` or ``(False,
    exception)`` to ``box``."""
    try:
        box.append((True, call(*args, **kwargs)))
    except BaseException as exc:  # noqa: BLE001 - the caller raises it again
        box.append((False, exc))


def _neutral(func, name):
    """``func`` as a function whose frame shows :data:`FRAME_FILE`, lines past its end,
    the name ``name``, renamed locals and a module of its own (builtins only): what runs on
    the ``frame`` variant's thread besides the test names none of the harness."""
    code = _renamed_code(func.__code__, True, False).replace(co_name=name, co_qualname=name)
    return types.FunctionType(code, {"__name__": FRAME_NAME, "__builtins__": builtins}, name,
                              func.__defaults__, func.__closure__)


_POSITIONAL_CALL = _neutral(_positional_call, "call")
_THREAD_BODY = _neutral(_thread_body, "run")


def _in_fresh_thread(call, *args, **kwargs):
    """``call(*args, **kwargs)`` run in a new thread, in a copy of the caller's context
    (its context variables), and waited for: its result returned, its exception raised.
    The thread's stack holds ``threading``'s frames and :data:`FRAME_FILE`'s only, so code
    that walks its callers (``traceback.extract_stack``, ``inspect.stack``, ``f_back``)
    finds no file, function or module of pytest, pluggy or the harness."""
    box = []
    thread = threading.Thread(target=contextvars.copy_context().run,
                              args=(_THREAD_BODY, box, call, args, kwargs), daemon=True)
    thread.start()
    thread.join()
    if not box:
        raise RuntimeError("the frame variant's thread ended without a result")
    ok, value = box[0]
    if ok:
        return value
    raise value


#: What the ``modules`` variant takes out of ``sys.modules`` during a test's call: modules
#: whose top-level name is one of these or whose name holds ``pytest`` or ``pluggy`` (a
#: plugin: ``pytest_timeout``, ``anyio.pytest_plugin``), unless they are the repository's
#: own, and every module of the harness directory.
RUNNER_MODULES = ("py", "iniconfig")
_HARNESS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "")


def _is_runner_module(name, module, repo):
    if name == "__main__":
        return False
    path = getattr(module, "__file__", None) or ""
    if path.startswith(_HARNESS_DIR):
        return True
    runner = name.partition(".")[0] in RUNNER_MODULES or "pytest" in name or "pluggy" in name
    return runner and not (repo and path.startswith(repo))


def _runner_modules_hidden(state, *args, **kwargs):
    """The ``modules`` variant's test function (bound to ``(original, repo)``): ``original``
    called while pytest's, pluggy's and the harness's modules are out of ``sys.modules``
    (:func:`_is_runner_module`); they are back, as they were, once it returns or raises."""
    original, repo = state
    modules = sys.modules
    hidden = {name: module for name, module in list(modules.items())
              if _is_runner_module(name, module, repo)}
    for name in hidden:
        modules.pop(name, None)
    try:
        return original(*args, **kwargs)
    finally:
        modules.update(hidden)


def import_unobserved(repo, changed):
    """The ``modules`` variant's imports, before pytest starts: the modules of the files the
    patch touched (``changed``: paths relative to ``repo``; test files and conftests left
    out) imported while the runner's modules are out of ``sys.modules``
    (:func:`_runner_modules_hidden`), so what their code decides at import (a default
    argument, a module constant) is decided without a test runner in sight. A module that
    imports pytest then gets a copy of its own, never the runner's. A module that fails to
    import here is imported again by the tests (and fails there, as in any run)."""
    import importlib

    root = os.path.realpath(repo)
    for rel in changed or ():
        parts = rel.replace(os.sep, "/").split("/")
        if not rel.endswith(".py") or parts[-1] == "conftest.py" or any(
                p in ("test", "tests", "testing") for p in parts[:-1]) or \
                parts[-1].startswith("test_") or parts[-1].endswith("_test.py"):
            continue
        name = _module_name(os.path.join(root, rel))
        if not name or name in sys.modules:
            continue
        try:
            _runner_modules_hidden((importlib.import_module, os.path.join(root, "")), name)
        except BaseException:  # noqa: BLE001 - the tests import it again and say why
            pass


#: What the ``module_name`` variant names the modules of the tests: ``case_0``, ``case_1``, ...
#: in the order of their real names.
MODULE_PREFIX = "case_"


def _test_modules(test_files, rootdir, repo):
    """name -> module of every loaded module of the tests: those imported from
    ``test_files`` (absolute real paths of the collected test modules), the conftests under
    ``rootdir`` or ``repo``, the packages holding test modules under them named as tests
    are (:func:`_is_test_package`: ``tests``, ``tests.unit_tests``; not the package of the
    code under test, unless it is named so), and, when ``rootdir`` lies outside ``repo``,
    every module from a file under it (the hidden suite's helpers)."""
    root = os.path.join(os.path.realpath(rootdir), "")
    code = os.path.join(os.path.realpath(repo), "") if repo else None
    outside = code is None or not (root.startswith(code) or code.startswith(root))
    test_dirs = {os.path.join(os.path.dirname(f), "") for f in test_files}
    out = {}
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if name == "__main__" or not isinstance(path, str):
            continue
        path = os.path.realpath(path)
        under = path.startswith(root) or bool(code) and path.startswith(code)
        base = os.path.basename(path)
        package = os.path.join(os.path.dirname(path), "")
        if path in test_files or outside and path.startswith(root) or under and (
                base == "conftest.py" or base == "__init__.py"
                and _is_test_package(name.rpartition(".")[2])
                and any(d.startswith(package) for d in test_dirs)):
            out[name] = module
    return out


def _is_test_package(name):
    """A package named as tests are (``tests``, ``test``, ``testing``, ``test_unit``,
    ``unit_tests``), not a library whose name merely holds the word (``testfixtures``)."""
    name = name.lower()
    return name in ("test", "tests", "testing") or name.startswith("test_") or \
        name.endswith(("_test", "_tests"))


def _renamed_in(value, old, new, seen):
    """Make the functions and classes of ``value`` (a function, a class and what its
    namespace holds, through static and class methods) whose ``__module__`` is ``old`` say
    ``new``."""
    value = getattr(value, "__func__", value)
    if id(value) in seen or not isinstance(value, (type, types.FunctionType)):
        return
    seen.add(id(value))
    if getattr(value, "__module__", None) == old:
        try:
            value.__module__ = new
        except (AttributeError, TypeError):  # a built-in type
            return
    if isinstance(value, type):
        for member in list(vars(value).values()):
            _renamed_in(member, old, new, seen)


def rename_test_modules(modules):
    """The ``module_name`` variant, once collection is done: each module of ``modules`` (name ->
    module, :func:`_test_modules`) is put in ``sys.modules`` under a name of its own
    (:data:`MODULE_PREFIX` and a number) and taken out under its real one; its
    ``__name__``, ``__spec__.name``, ``__package__`` (when that package is renamed too) and
    the ``__module__`` of the functions and classes it defines say the new name (pickling
    by name and ``from . import`` keep working). Returns real name -> new name."""
    taken = set(sys.modules)
    names, number = {}, 0
    for old in sorted(modules):
        while f"{MODULE_PREFIX}{number}" in taken:
            number += 1
        names[old] = f"{MODULE_PREFIX}{number}"
        number += 1
    for old, new in names.items():
        module = modules[old]
        ns = vars(module)
        seen = set()
        for value in list(ns.values()):
            _renamed_in(value, old, new, seen)
        ns["__name__"] = new
        if ns.get("__package__") in names:
            ns["__package__"] = names[ns["__package__"]]
        spec = ns.get("__spec__")
        if spec is not None:
            try:
                spec.name = new
            except AttributeError:
                pass
        if sys.modules.get(old) is module:
            del sys.modules[old]
        sys.modules[new] = module
    return names


def _no_current_test_var(item, when):
    """Stands in for ``_pytest.runner._update_current_test_var`` in the ``environment``
    variant: ``PYTEST_CURRENT_TEST`` is never set."""
    os.environ.pop("PYTEST_CURRENT_TEST", None)


#: Bytes of test ids per ``items`` record (the verdict channel carries one record per
#: message, at most 256 KiB).
ITEMS_CHUNK_BYTES = 32 * 1024
#: Outcomes of a test's call reports, worst last: the worst one reported wins.
_CALL_RANK = {None: 0, "passed": 1, "skipped": 2, "xfailed": 3, "xpassed": 4, "failed": 5,
              "timeout": 6}


def _is_subtest(report):
    """A report of one subtest (pytest's own ``SubtestReport``, or pytest-subtests')."""
    return type(report).__name__ == "SubtestReport" or getattr(report, "context", None) \
        is not None and hasattr(report.context, "kwargs")


def _hidden_defs(pristine):
    """[(module name, path, [(top-level def or class name, undecorated)])] of the hidden
    ``.py`` files (``pristine``: absolute path -> sha256) but conftests, read from disk."""
    import ast

    out = []
    for path in sorted(pristine):
        name = _module_name(path)
        if name is None:
            continue
        try:
            with open(path, "rb") as fh:
                tree = ast.parse(fh.read())
        except (OSError, SyntaxError, ValueError):
            continue
        defs = [(n.name, not n.decorator_list) for n in tree.body if isinstance(
            n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        out.append((name, path, defs))
    return out


def _module_name(path):
    """The dotted name a ``.py`` file at absolute ``path`` is imported as with pytest's
    prepend mode (its package chain: the directories upward holding an ``__init__.py``,
    as they are on disk now); None for a conftest or a non-Python file."""
    d, base = os.path.split(path)
    if not base.endswith(".py") or base == "conftest.py":
        return None
    parts = [] if base == "__init__.py" else [base[:-3]]
    while os.path.isfile(os.path.join(d, "__init__.py")):
        d, pkg = os.path.split(d)
        parts.insert(0, pkg)
    return ".".join(parts) or None


class _ReportPlugin:
    def __init__(self, send, repo, suspects, channel=None, skip=None):
        self._send, self._repo, self._suspects = send, repo, suspects
        self._channel = channel
        skip = skip or {}
        self._skip_ids = frozenset(str(i) for i in skip.get("ids") or ())
        only = skip.get("only")
        self._only = None if only is None else frozenset(str(i) for i in only)
        self._keep = frozenset(os.path.realpath(str(p)) for p in skip.get("keep") or ())
        self._skip_paths = [str(p) for p in skip.get("paths") or ()]
        self._skip_abs = frozenset()
        self._pristine = {os.path.realpath(str(k)): str(v)
                          for k, v in (skip.get("pristine") or {}).items()}
        self._defs = None if self._pristine else []
        self._tests = {}
        self._items = {}
        self._hooks = None
        self._config = None
        self._live = []
        self._plain_runtest = pytest.Function.runtest
        self._said = set()
        self._variant = frozenset(skip.get("variant") or ())
        self._renamed = {}  # the ``module_name`` variant: real name -> new name
        self._import_default_plugins()
        if "environment" in self._variant:  # before the snapshots: the harness's own change
            import _pytest.runner

            _pytest.runner._update_current_test_var = _no_current_test_var
        self._call_path = _bindings(CALL_PATH)
        self._everything = _bindings(_all_modules())

    @staticmethod
    def _import_default_plugins():
        # What pytest.main would import anyway, now, so the snapshot covers it before any
        # code of the repository runs.
        import importlib

        from _pytest.config import default_plugins

        for name in default_plugins:  # (pytest_timeout: imported by -p, checked at configure)
            try:
                importlib.import_module(f"_pytest.{name}")
            except ImportError:
                pass

    def _tamper(self, why):
        if why not in self._said:
            self._said.add(why)
            self._send({"k": "tamper", "why": why[:300]})

    def _impls(self):
        hook = self._config.hook
        return {name: [(i.plugin, i.function) for i in getattr(hook, name).get_hookimpls()]
                for name in VERDICT_HOOKS if hasattr(hook, name)}

    def pytest_addoption(self, parser, pluginmanager):
        # Called as the plugin is registered, before any conftest is imported.
        if "environment" in self._variant:
            os.environ.pop("PYTEST_VERSION", None)

    @pytest.hookimpl(trylast=True)
    def pytest_configure(self, config):
        if "environment" in self._variant:
            os.environ.pop("PYTEST_VERSION", None)
        # Initial conftests may have imported the code under test by now: what changed
        # since the snapshot must come from pytest itself. Then the snapshot is retaken.
        self._config = config
        root = str(config.rootpath)
        self._skip_abs = frozenset(os.path.normpath(os.path.join(root, p))
                                   for p in self._skip_paths)
        for label, value in _changed(self._everything):
            if not _pytests_own(value):
                self._tamper(f"replaced before configure: {label}")
        pm = config.pluginmanager
        if vars(pm).get("_inner_hookexec") is not pluggy._callers._multicall:
            self._tamper("the plugin manager's hook execution was replaced before configure")
        self._call_path = _bindings(CALL_PATH)
        self._everything = _bindings(_all_modules())
        # Instance state that runs every hook (red team: a wrapped _inner_hookexec turned
        # the test call's exception into a pass).
        self._live = _instance_bindings("pluginmanager", pm) + [
            b for name in VERDICT_HOOKS if hasattr(config.hook, name)
            for b in _instance_bindings(f"hook.{name}", getattr(config.hook, name))]

    @pytest.hookimpl(tryfirst=True)
    def pytest_ignore_collect(self, collection_path, config):
        if self._skip_abs and os.path.normpath(str(collection_path)) in self._skip_abs:
            return True
        return None

    def pytest_collectstart(self, collector):
        self._send({"k": "collect", "id": collector.nodeid})

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session, config, items):
        if "state" in self._variant:
            items.reverse()
        if not self._skip_ids and self._only is None:
            return
        kept, dropped = [], []
        for item in items:
            drop = item.nodeid in self._skip_ids or self._only is not None and not (
                item.nodeid in self._only or os.path.realpath(str(item.path)) in self._keep)
            (dropped if drop else kept).append(item)
        if dropped:
            items[:] = kept
            config.hook.pytest_deselected(items=dropped)

    @pytest.hookimpl(trylast=True)
    def pytest_itemcollected(self, item):
        obj = getattr(item, "obj", None) if isinstance(item, pytest.Function) else None
        self._items[item.nodeid] = (obj, getattr(obj, "__code__", None))

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session):
        ids = [item.nodeid for item in session.items]
        chunk, size = [], 0
        for nodeid in ids:  # one message each, well under the channel's message size
            if size > ITEMS_CHUNK_BYTES:
                self._send({"k": "items", "ids": chunk, "last": False})
                chunk, size = [], 0
            chunk.append(nodeid)
            size += len(nodeid) + 4
        self._send({"k": "items", "ids": chunk, "last": True})
        if "cwd" in self._variant:
            import tempfile

            os.chdir(tempfile.mkdtemp(prefix="cwd-"))
        for label, _ in _changed(self._everything):
            self._tamper(f"replaced during collection: {label}")
        self._check_pristine(session.items)
        self._hooks = self._impls()
        for name, impls in self._hooks.items():
            for plugin, function in impls:
                if _is_foreign(function, plugin, self._repo, self._suspects):
                    self._tamper(f"code of the repository implements {name}: "
                                 f"{getattr(function, '__qualname__', function)!r:.80}")
        if "module_name" in self._variant:
            files = {os.path.realpath(str(node.path)) for node in (
                item.getparent(pytest.Module) for item in session.items) if node is not None}
            self._renamed = rename_test_modules(
                _test_modules(files, str(session.config.rootpath), self._repo))

    def _check_defs(self):
        """Each function and class a hidden file defines at its top level (``def``,
        ``class``) is, in the module imported from that file, still one defined there: a
        function whose code (through ``__wrapped__``) comes from the file, a class of that
        module (an undecorated ``def`` must be a function); code run by the tests cannot
        swap a hidden helper's function for its own. A decorated one's other values (a
        decorator's object that wraps nothing) are not judged."""
        if self._defs is None:
            self._defs = _hidden_defs(self._pristine)
        for real, path, defs in self._defs:
            name = self._renamed.get(real, real)  # the ``module_name`` variant renames it
            module = sys.modules.get(name)
            if module is None or os.path.realpath(
                    str(getattr(module, "__file__", "") or "")) != path:
                continue  # not imported (yet), or the import check's business
            ns = vars(module)
            for key, plain in defs:
                value = ns.get(key)
                if isinstance(value, type):
                    ok = value.__module__ == name
                elif plain and not isinstance(value, types.FunctionType):
                    ok = False  # an undecorated def is a function: not a stand-in object
                else:
                    inner = value
                    for _ in range(32):
                        if not hasattr(inner, "__wrapped__"):
                            break
                        inner = inner.__wrapped__
                    code = getattr(inner, "__code__", None)
                    ok = (not isinstance(inner, types.FunctionType) or code is not None
                          and os.path.realpath(code.co_filename) == path)
                if not ok:
                    self._tamper(f"{real}.{key} of a hidden file was replaced: {path}")

    def _check_pristine(self, items=()):
        """The hidden test files still hold the bytes the harness placed, and the test
        modules collected from them were imported from those files (not a module put into
        ``sys.modules`` under their name, nor one the import system found elsewhere)."""
        if not self._pristine:
            return
        import hashlib

        for path, want in sorted(self._pristine.items()):
            try:
                with open(path, "rb") as fh:
                    got = hashlib.sha256(fh.read()).hexdigest()
            except OSError:
                got = None
            if got != want:
                self._tamper(f"a hidden test file changed under the tests: {path}")
        self._check_defs()
        for path in sorted(self._pristine):
            name = _module_name(path)
            module = sys.modules.get(self._renamed.get(name, name)) if name else None
            if module is None:
                continue
            origin = getattr(module, "__file__", None)
            if not origin or os.path.realpath(str(origin)) != path:
                self._tamper(f"the module {name!r} of a hidden file was not imported from "
                             f"it: {path}")
        seen = set()
        for item in items:
            module = item.getparent(pytest.Module)
            if module is None or id(module) in seen:
                continue
            seen.add(id(module))
            path = os.path.realpath(str(module.path))
            if path not in self._pristine:
                continue
            origin = getattr(getattr(module, "_obj", None), "__file__", None)
            if not origin or os.path.realpath(str(origin)) != path:
                self._tamper(f"a hidden test module was not imported from its file: {path}")

    def _check_item(self, item):
        for label, _ in _changed(self._call_path) + _changed(self._live):
            self._tamper(f"replaced under the tests: {label}")
        self._check_defs()
        if self._hooks is not None and self._impls() != self._hooks:
            self._tamper("the hook implementations that decide verdicts changed")
        if "runtest" in vars(item):
            self._tamper(f"{item.nodeid}: the item's runtest was replaced")
        obj, code = self._items.get(item.nodeid, (None, None))
        if isinstance(item, pytest.Function) and (
                item.obj is not obj or getattr(item.obj, "__code__", None) is not code):
            self._tamper(f"{item.nodeid}: the test function was replaced")

    def _raw(self, nodeid, exc=None, failed=False):
        verdict = "failed" if failed else "passed"
        if exc is not None:
            verdict = "skipped" if isinstance(exc, pytest.skip.Exception) else "failed"
        self._send({"k": "raw", "id": nodeid, "v": verdict})

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_call(self, item):
        """The raw verdict is taken as close to the test as possible: for plain test
        functions, inside a wrapper put in place of the test function for this one call
        (below every hook dispatch: whatever rewrites verdicts above it is contradicted by
        it); for other items (unittest, doctest), around the call."""
        self._check_item(item)
        innermost = isinstance(item, pytest.Function) and \
            type(item).runtest is self._plain_runtest
        if innermost:
            original = item.obj
            called = original
            if "frame" in self._variant:
                called = _disguised(original)
            if "modules" in self._variant:
                called = types.MethodType(_runner_modules_hidden, (called, self._repo))
            if "state" in self._variant:
                called = types.MethodType(_repeated_call, called)
            if self._channel is None:  # (unit tests build the plugin without a channel)
                raw = self._raw

                @functools.wraps(original)
                def call(*args, **kwargs):
                    try:
                        result = called(*args, **kwargs)
                    except BaseException as exc:
                        raw(item.nodeid, exc)
                        raise
                    raw(item.nodeid)
                    return result
            else:
                write, fd, tag = self._channel
                head = tag + b'{"k": "raw", "h": "' + item.nodeid.encode(
                    "utf-8", "surrogatepass").hex().encode() + b'", "v": "'
                call = types.MethodType(_raw_call, (
                    called, head + b'passed"}\n', head + b'failed"}\n',
                    head + b'skipped"}\n', write, fd, pytest.skip.Exception))
            item.obj = call
        try:
            result = yield
        except BaseException as exc:
            if not innermost:
                self._raw(item.nodeid, exc)
            raise
        finally:
            if innermost:
                item.obj = original
        if not innermost:
            # unittest.TestCase items keep their failures on the item, not in the call.
            self._raw(item.nodeid, failed=bool(getattr(item, "_excinfo", None)))
        return result

    def pytest_runtest_logstart(self, nodeid, location):
        self._send({"k": "start", "id": nodeid})

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report):
        entry = self._tests.setdefault(report.nodeid, {"outcome": None, "duration": 0.0})
        if _is_subtest(report):
            # A subtest's failure fails its test; a skipped or passed subtest leaves the
            # verdict to the test's own reports (unittest's final report says passed).
            if report.failed:
                entry["subtest_failed"] = True
            return
        entry["duration"] += float(getattr(report, "duration", 0.0) or 0.0)
        xfail = hasattr(report, "wasxfail")
        if report.when == "call":
            if xfail:
                outcome = "xfailed" if report.skipped else "xpassed"
            elif report.passed:
                outcome = "passed"
            elif report.skipped:
                outcome = "skipped"
            else:
                outcome = "timeout" if _is_timeout(report) else "failed"
            if _CALL_RANK[outcome] > _CALL_RANK.get(entry["outcome"], 0):
                entry["outcome"] = outcome
        elif report.failed:
            if entry["outcome"] in (None, "passed"):
                entry["outcome"] = "timeout" if _is_timeout(report) else "error"
        elif report.skipped and entry["outcome"] is None:
            entry["outcome"] = "xfailed" if xfail else "skipped"

    def pytest_runtest_logfinish(self, nodeid, location):
        entry = self._tests.pop(nodeid, None)
        if entry is not None:
            outcome = entry["outcome"] or "error"
            if entry.get("subtest_failed") and outcome in ("passed", "skipped", "xpassed"):
                outcome = "failed"
            self._send({"k": "test", "id": nodeid, "outcome": outcome,
                        "duration": round(entry["duration"], 6)})

    def pytest_collectreport(self, report):
        if report.failed:
            self._send({"k": "collection_error", "id": report.nodeid or "<collection>"})
        self._send({"k": "collected", "id": report.nodeid, "failed": bool(report.failed)})

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session, exitstatus):
        self._check_pristine()
        for label, _ in _changed(self._everything):
            self._tamper(f"replaced by the end of the session: {label}")
        self._send({"k": "session", "exitstatus": int(exitstatus),
                    "collected": session.testscollected, "t": time.time()})
