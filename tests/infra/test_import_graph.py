"""The package layout is the architecture: imports run one way, and `envs` is a DAG that never imports ddppo.

Every module's imports (also those inside functions) are read with `ast`; nothing is imported.
Layers, lowest first: infrastructure (ddppo/*.py) -> model -> rollout -> ppo -> train | eval -> sweep ->
benchmarks -> cli. A module may import its own layer and the layers below; `train` and `eval` are two
applications side by side and never import each other.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROOTS = ("ddppo", "envs", "benchmarks")
INFRASTRUCTURE_PACKAGES = ("distributed", "interop", "config")  # packages of the infrastructure layer
LAYERS = [("infrastructure",), ("model",), ("rollout",), ("ppo",), ("train", "eval"), ("sweep",), ("benchmarks",),
          ("cli",)]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, known: set[str]) -> set[str]:
    """The project modules `path` imports, resolved to module names (a package's `from p import m` -> p.m)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def project_graph() -> dict[str, set[str]]:
    files = [p for root in ROOTS for p in sorted((REPO / root).rglob("*.py"))]
    known = {module_name(p) for p in files}
    return {module_name(p): imports_of(p, known) for p in files}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as [a, b, ..., a], or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt in graph and nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def group_of(module: str) -> str | None:
    """The layer group of a ddppo/benchmarks module; None outside them (envs, third party)."""
    parts = module.split(".")
    if parts[0] == "benchmarks":
        return "benchmarks"
    if parts[0] != "ddppo":
        return None
    if len(parts) > 2 and parts[1] in INFRASTRUCTURE_PACKAGES:
        return "infrastructure"
    if len(parts) == 1 or parts[1] in ("cli", "__main__"):
        return "cli" if len(parts) > 1 else "infrastructure"
    return parts[1] if len(parts) > 2 or parts[1] in {g for layer in LAYERS for g in layer} else "infrastructure"


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    index = {group: i for i, layer in enumerate(LAYERS) for group in layer}
    bad = []
    for module, targets in sorted(graph.items()):
        mine = group_of(module)
        for target in sorted(targets):
            theirs = group_of(target)
            if mine is None or theirs is None:
                continue
            if index[theirs] > index[mine] or (index[theirs] == index[mine] and theirs != mine):
                bad.append(f"{module} ({mine}) imports {target} ({theirs})")
    return bad


def test_envs_is_a_dag():
    graph = project_graph()
    envs = {m: {t for t in ts if t.split(".")[0] == "envs"} for m, ts in graph.items() if m.split(".")[0] == "envs"}
    assert find_cycle(envs) is None, f"import cycle in envs: {' -> '.join(find_cycle(envs))}"


def test_envs_never_imports_ddppo():
    bad = [f"{m} imports {t}" for m, ts in project_graph().items() if m.split(".")[0] == "envs"
           for t in ts if t.split(".")[0] in ("ddppo", "benchmarks")]
    assert not bad, bad


def test_ddppo_has_no_import_cycle():
    graph = project_graph()
    ddppo = {m: {t for t in ts if t.split(".")[0] == "ddppo"} for m, ts in graph.items() if m.startswith("ddppo")}
    cycle = find_cycle(ddppo)
    assert cycle is None, f"import cycle: {' -> '.join(cycle)}"


def test_layers_run_one_way():
    assert not layer_violations(project_graph())


@pytest.mark.parametrize("graph, cycle", [
    ({"envs.a": {"envs.b"}, "envs.b": {"envs.c"}, "envs.c": {"envs.a"}}, True),
    ({"envs.a": {"envs.b"}, "envs.b": {"envs.c"}, "envs.c": set()}, False),
])
def test_the_cycle_check_can_fail(graph, cycle):
    assert (find_cycle(graph) is not None) == cycle


def test_the_layer_check_can_fail():
    graph = {"ddppo.rollout.collector": {"ddppo.train.trainer", "ddppo.model.policy", "ddppo.config"},
             "ddppo.train.trainer": {"ddppo.eval.runner"}, "ddppo.config": {"envs.registry"}}
    assert layer_violations(graph) == [
        "ddppo.rollout.collector (rollout) imports ddppo.train.trainer (train)",
        "ddppo.train.trainer (train) imports ddppo.eval.runner (eval)",
    ]


def test_imports_are_resolved_to_modules():
    graph = project_graph()
    assert "ddppo.model.policy" in graph["ddppo.rollout.collector"]
    assert "ddppo.checkpoint" in graph["ddppo.eval.runner"]  # `from ddppo import checkpoint as ckpt`
