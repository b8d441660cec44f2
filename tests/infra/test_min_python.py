"""Python 3.9 is the oldest supported Python (habitat-sim's conda builds exist only for it).

A cheap static check, run on whatever Python runs the suite, so that a 3.10+ feature fails here
and not first on a user's 3.9:

- every source parses with the 3.9 grammar (`match`, `except*`, ... are rejected);
- no `X | Y` type union is evaluated at run time (`isinstance(x, int | str)`, `Alias = int | None`,
  an annotation in a module without `from __future__ import annotations`);
- the config schema's annotations, which OmegaConf evaluates (`typing.get_type_hints`), hold no `|`;
- vermin finds no standard-library feature newer than 3.9 (`zip(strict=)`, `itertools.pairwise`,
  `int.bit_count`, `dataclass(kw_only=)`, ...).

The last tests feed each check a deliberately bad file, so none of them can pass by checking nothing.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import re
import subprocess
import sys
import typing
from pathlib import Path

import pytest

MIN_PYTHON = (3, 9)
REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("ddppo", "envs", "benchmarks")            # what users install: also checked by vermin
SOURCES = PACKAGES + ("tests", "tools")              # parsed with the 3.9 grammar
TYPE_NAMES = {"int", "float", "str", "bytes", "bool", "complex", "list", "dict", "tuple", "set", "frozenset",
              "type", "object", "Any", "Optional", "Union", "List", "Dict", "Tuple", "Set", "Callable",
              "Sequence", "Mapping", "Iterable", "Iterator", "Path"}
# vermin reads `procs[w].sentinel` (multiprocessing.Process.sentinel, 3.3+) as the 3.15 `sentinel` builtin.
VERMIN_EXCLUDE = ("sentinel",)


def python_files(roots, base=REPO):
    return sorted(p for root in roots for p in (base / root).rglob("*.py"))


def _is_union(node: ast.AST) -> bool:
    return isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr)


def _looks_like_type(node: ast.AST) -> bool:
    """None, a builtin/typing type name, or a subscripted generic such as list[int] (not `a | b[i]`)."""
    if isinstance(node, ast.Constant):
        return node.value is None
    if isinstance(node, ast.Name):
        return node.id in TYPE_NAMES
    if isinstance(node, ast.Attribute):
        return isinstance(node.value, ast.Name) and node.value.id == "typing"
    if isinstance(node, ast.Subscript):
        return _looks_like_type(node.value)
    if _is_union(node):
        return _looks_like_type(node.left) or _looks_like_type(node.right)
    return False


def _annotations(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            for arg in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
                if arg is not None and arg.annotation is not None:
                    yield arg.annotation
            if node.returns is not None:
                yield node.returns
        elif isinstance(node, ast.AnnAssign):
            yield node.annotation


def source_problems(path: Path) -> list[str]:
    """3.9-grammar parse errors and runtime-evaluated `X | Y` unions in one file."""
    name = str(path.relative_to(REPO) if path.is_relative_to(REPO) else path)
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), name, feature_version=MIN_PYTHON)
    except SyntaxError as err:
        return [f"{name}:{err.lineno}: not Python {MIN_PYTHON[0]}.{MIN_PYTHON[1]} syntax: {err.msg}"]
    future = any(isinstance(s, ast.ImportFrom) and s.module == "__future__"
                 and any(a.name == "annotations" for a in s.names) for s in tree.body)
    in_annotation = {id(sub) for ann in _annotations(tree) for sub in ast.walk(ann)}
    inner = {id(side) for node in ast.walk(tree) if _is_union(node) for side in (node.left, node.right)}
    out = []
    for node in ast.walk(tree):
        if not _is_union(node) or id(node) in inner:  # `a | b | c` is reported once, as a whole
            continue
        if id(node) in in_annotation:
            if not future:
                out.append(f"{name}:{node.lineno}: `{ast.unparse(node)}` in an annotation is evaluated at "
                           f"definition time (Python 3.10+); add `from __future__ import annotations` or use "
                           f"Optional[...]/Union[...]")
        elif _looks_like_type(node):
            out.append(f"{name}:{node.lineno}: `{ast.unparse(node)}` is a type union evaluated at run time "
                       f"(Python 3.10+); use Optional[...]/Union[...] or a tuple of types")
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("isinstance", "issubclass") and len(node.args) == 2
                and _is_union(node.args[1]) and id(node.args[1]) not in in_annotation
                and not _looks_like_type(node.args[1])):
            out.append(f"{name}:{node.lineno}: `{ast.unparse(node.args[1])}` passed to {node.func.id} is a type "
                       f"union (Python 3.10+); pass a tuple of types")
    return out


def schema_problems(cls: type, prefix: str = "") -> list[str]:
    """`|` in the annotations of a structured-config dataclass tree: OmegaConf evaluates them."""
    out = []
    try:
        typing.get_type_hints(cls)
    except Exception as err:  # TypeError on 3.9 for `int | None`
        out.append(f"{prefix or cls.__name__}: annotations of {cls.__name__} do not evaluate here: "
                   f"{type(err).__name__}: {err}")
    for f in dataclasses.fields(cls):
        text = f.type if isinstance(f.type, str) else ""
        if text and any(_is_union(n) for n in ast.walk(ast.parse(text, mode="eval"))):
            out.append(f"{prefix}{f.name}: annotation {text!r} uses `|`, which OmegaConf evaluates "
                       f"(Python 3.10+); use Optional[...]/Union[...]")
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if dataclasses.is_dataclass(default):
            out += schema_problems(type(default), f"{prefix}{f.name}.")
    return out


def vermin_problems(paths) -> list[str]:
    """Features newer than MIN_PYTHON that vermin finds (standard library API, keywords, syntax)."""
    if importlib.util.find_spec("vermin") is None:
        pytest.fail("vermin is not installed; it is in the dev extra: pip install -e '.[dev]'")
    target = f"-t={MIN_PYTHON[0]}.{MIN_PYTHON[1]}-"
    args = [target, "--no-tips", "--violations", "--format", "parsable", "--no-make-paths-absolute"]
    for name in VERMIN_EXCLUDE:
        args += ["--exclude", name]
    proc = subprocess.run([sys.executable, "-c", "import sys, vermin; sys.argv[0] = 'vermin'; vermin.main()",
                           *args, *map(str, paths)], cwd=REPO, capture_output=True, text=True, timeout=120)
    # parsable lines: path:line:col:py2:py3:feature. A violation has a path, a line and a py3 version;
    # the per-file and overall summaries have no line, notes such as "Excluding member" no version.
    fields = [line.split(":", 5) for line in proc.stdout.splitlines()]
    found = [":".join(f) for f in fields if len(f) == 6 and f[0] and f[1] and f[4]]
    if proc.returncode != 0 and not found:
        found = [f"vermin exited {proc.returncode}: {proc.stdout.strip()} {proc.stderr.strip()}"]
    return found


def test_requires_python_is_the_checked_minimum():
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    declared = re.search(r'^requires-python\s*=\s*"([^"]*)"', text, re.M)
    assert declared and declared.group(1) == f">={MIN_PYTHON[0]}.{MIN_PYTHON[1]}", declared


def test_sources_use_only_python_3_9_syntax_and_no_runtime_unions():
    files = python_files(SOURCES)
    assert len(files) > 50, files  # the check really looked at the code
    problems = [p for path in files for p in source_problems(path)]
    assert not problems, "\n".join(problems)


def test_config_schema_annotations_evaluate_on_python_3_9():
    from ddppo.config import Config

    assert schema_problems(Config) == []


def test_vermin_finds_nothing_newer_than_python_3_9():
    problems = vermin_problems(PACKAGES)
    assert not problems, "\n".join(problems)


# --- the checks above can fail: each is shown a deliberately bad file ---

BAD_SYNTAX = "def f(x):\n    match x:\n        case 1:\n            return 1\n"
BAD_RUNTIME_UNIONS = """
def f(x):
    return isinstance(x, int | str | None)

def g(x):
    return isinstance(x, Alpha | Beta)

Alias = dict[str, int] | None
"""
BAD_ANNOTATION = "def f(x: int | None) -> None:\n    pass\n"
FINE = """
from __future__ import annotations
import numpy as np

def f(x: int | None, done: np.ndarray) -> list[int] | None:
    flags = done | np.zeros(3, bool)
    flags |= done[0] | done[1]
    return None
"""
BAD_SCHEMA = """
from __future__ import annotations
import dataclasses
from typing import Optional

@dataclasses.dataclass(frozen=True)
class Inner:
    fine: Optional[int] = None
    bad: int | None = None

@dataclasses.dataclass(frozen=True)
class Outer:
    inner: Inner = dataclasses.field(default_factory=Inner)
"""
BAD_STDLIB = """
import itertools

def f(a, b):
    return list(zip(a, b, strict=True)), list(itertools.pairwise(a)), (7).bit_count()
"""


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_source_check_catches_bad_files(tmp_path):
    assert "syntax" in " ".join(source_problems(_write(tmp_path, "bad_syntax.py", BAD_SYNTAX)))
    runtime = source_problems(_write(tmp_path, "bad_unions.py", BAD_RUNTIME_UNIONS))
    assert len(runtime) == 3 and all("union" in p for p in runtime), runtime
    assert any("int | str | None" in p for p in runtime) and any("Alpha | Beta" in p for p in runtime)
    annotation = source_problems(_write(tmp_path, "bad_annotation.py", BAD_ANNOTATION))
    assert len(annotation) == 1 and "definition time" in annotation[0], annotation
    assert source_problems(_write(tmp_path, "fine.py", FINE)) == []


def test_schema_check_catches_a_union_field(tmp_path):
    path = _write(tmp_path, "bad_schema.py", BAD_SCHEMA)
    spec = importlib.util.spec_from_file_location("bad_schema", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bad_schema"] = module  # dataclasses and get_type_hints look the module up
    try:
        spec.loader.exec_module(module)
        problems = schema_problems(module.Outer)
    finally:
        del sys.modules["bad_schema"]
    assert any(p.startswith("inner.bad: annotation 'int | None'") for p in problems), problems
    assert not any("fine" in p for p in problems), problems


def test_vermin_catches_newer_stdlib_features(tmp_path):
    problems = vermin_problems([_write(tmp_path, "bad_stdlib.py", BAD_STDLIB)])
    text = "\n".join(problems)
    for feature in ("zip(strict)", "itertools.pairwise", "int.bit_count"):
        assert feature in text, text
