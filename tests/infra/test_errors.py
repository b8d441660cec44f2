"""User errors have one home, ddppo/errors.py: every class of them is defined there (EnvError, the environments'
own, stays in envs/base.py and is named in the table), and the one table of kinds and labels is what the CLI and
a rank's last-resort exit both read."""

from __future__ import annotations

import ast

from testutil import REPO

from ddppo import errors
from ddppo.distributed import deadline
from ddppo.envs.base import EnvError

ERRORS_PY = REPO / "ddppo" / "errors.py"


def user_error_classes_outside(root, known: set[str], home) -> list[str]:
    """Classes under `root` that derive (by base name, transitively) from one of `known`, defined elsewhere than
    `home`: `path:line Name(Base)`."""
    found, names, changed = [], set(known), True
    trees = {p: ast.parse(p.read_text(), str(p)) for p in sorted(root.rglob("*.py"))}
    while changed:  # a subclass of a subclass counts too
        changed = False
        for tree in trees.values():
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef) and node.name not in names and any(
                        getattr(b, "id", getattr(b, "attr", None)) in names for b in node.bases):
                    names.add(node.name)
                    changed = True
    for path, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name in names and path != home:
                bases = ", ".join(ast.unparse(b) for b in node.bases)
                found.append(f"{path.relative_to(root.parent)}:{node.lineno} {node.name}({bases})")
    return found


def test_every_user_error_class_is_defined_in_errors_py():
    kinds = {cls.__name__ for cls, _ in errors.user_error_kinds() if cls is not EnvError}
    assert user_error_classes_outside(REPO / "ddppo", kinds, ERRORS_PY) == []


def test_the_one_home_check_can_fail(tmp_path):
    pkg = tmp_path / "ddppo"
    pkg.mkdir()
    (pkg / "errors.py").write_text("class ConfigError(ValueError): ...\n")
    (pkg / "claim.py").write_text("from ddppo.errors import ConfigError\nclass Busy(ConfigError): ...\n"
                                  "class Busier(Busy): ...\nclass Other(ValueError): ...\n")
    assert user_error_classes_outside(pkg, {"ConfigError"}, pkg / "errors.py") == [
        "ddppo/claim.py:2 Busy(ConfigError)", "ddppo/claim.py:3 Busier(Busy)"]


def test_each_kind_has_its_label_and_exit_code_2():
    labels = {cls: label for cls, label in errors.user_error_kinds()}
    assert labels == {errors.ConfigError: "config error", EnvError: "environment error",
                      errors.CheckpointError: "checkpoint error", errors.RewardModelError: "reward model error",
                      errors.LaunchError: "launcher error"}
    for cls in (*labels, errors.DirectoryBusy, errors.SweepError):
        assert errors.user_error_label(cls("x")) in labels.values()
        assert deadline.exit_code(cls("x")) == errors.EXIT_USER_ERROR == 2
    assert errors.user_error_label(errors.SweepError("x")) == "config error"
    assert errors.user_error_label(ValueError("x")) is None and deadline.exit_code(ValueError("x")) == 1


def test_errors_py_imports_nothing_at_module_level():
    """The CLI and the launcher variables' reader import it before anything heavy: EnvError's module
    (gymnasium, numpy) is imported only when the table is asked for."""
    top = [n for n in ast.parse(ERRORS_PY.read_text()).body if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert [ast.unparse(n) for n in top] == ["from __future__ import annotations"]
