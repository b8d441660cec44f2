"""The package layout is the architecture: imports run one way, and `envs` is a DAG that never imports ddppo.

Every module's imports (also those inside functions) are read with `ast`; nothing is imported. Modules are named
as installed: the repository's `envs/` and `benchmarks/` are `ddppo.envs` and `ddppo.benchmarks`.
The layers are `ddppo.LAYERS` (the one list: ddppo/__init__.py's module map and docs/design/architecture.md are
checked against it here). A module may import its own layer and the layers below; `train`, `eval` and `export`
are applications side by side and never import each other; the library never imports `benchmarks/`, which
registers its `ddppo bench` subcommands through the `ddppo.commands` entry point, and whose groups (peers, speed,
learning) stand side by side over what they share (`ddppo.benchmarks.common`).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ddppo import INFRASTRUCTURE_PACKAGES, LAYERS

REPO = Path(__file__).resolve().parents[2]
ROOTS = ("ddppo", "envs", "benchmarks", "configs", "slurm")
INSTALLED_AS = {"envs": "ddppo.envs", "benchmarks": "ddppo.benchmarks", "configs": "ddppo.configs",
                "slurm": "ddppo.slurm"}  # pyproject.toml's package-dir
DATA = ("ddppo.configs", "ddppo.slurm")  # data packages: import nothing, anyone may read them
LEAVES = ("ddppo.field_metadata", "ddppo.entry_points")  # leaf modules: import nothing of the project, envs may import them too


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    parts[0] = INSTALLED_AS.get(parts[0], parts[0])
    return ".".join(parts)


def is_envs(module: str) -> bool:
    return module == "ddppo.envs" or module.startswith("ddppo.envs.")


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
    if parts[:2] == ["ddppo", "benchmarks"]:
        return "benchmarks"
    if parts[0] != "ddppo" or is_envs(module):
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
    envs = {m: {t for t in ts if is_envs(t)} for m, ts in graph.items() if is_envs(m)}
    assert find_cycle(envs) is None, f"import cycle in envs: {' -> '.join(find_cycle(envs))}"


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """`graph` with each envs sub-package (envs/habitat/, envs/scenes/, ...) as one node: its modules' imports."""
    def node(module: str) -> str:
        parts = module.split(".")
        return ".".join(parts[:3]) if len(parts) > 3 else module
    out: dict[str, set[str]] = {}
    for module, targets in graph.items():
        out.setdefault(node(module), set()).update(node(t) for t in targets if node(t) != node(module))
    return out


def test_envs_packages_run_one_way():
    """A package of envs sits either below or above another, never both: envs/scenes/ (scene files, simulators,
    generators) below the environments built on it (envs/habitat/, envs/habitat_lab/)."""
    graph = project_graph()
    envs = package_graph({m: {t for t in ts if is_envs(t)} for m, ts in graph.items() if is_envs(m)})
    assert find_cycle(envs) is None, f"import cycle between envs packages: {' -> '.join(find_cycle(envs))}"
    assert "ddppo.envs.scenes" in envs["ddppo.envs.habitat"] and "ddppo.envs.scenes" in envs["ddppo.envs.habitat_lab"]
    back = package_graph({"ddppo.envs.scenes.episode_gen": {"ddppo.envs.habitat.options"},
                          "ddppo.envs.habitat.env": {"ddppo.envs.scenes.dataset", "ddppo.envs.base"}})
    assert find_cycle(back) == ["ddppo.envs.habitat", "ddppo.envs.scenes", "ddppo.envs.habitat"]


def test_envs_never_imports_ddppo():
    bad = [f"{m} imports {t}" for m, ts in project_graph().items() if is_envs(m)
           for t in ts if t.split(".")[0] == "ddppo" and not is_envs(t) and t not in DATA + LEAVES]
    assert not bad, bad


def test_data_packages_and_leaves_import_nothing_of_the_project():
    graph = project_graph()
    assert all(not graph[m] for m in DATA + LEAVES), {m: graph[m] for m in DATA + LEAVES}


def library_imports_of_benchmarks(graph: dict[str, set[str]]) -> list[str]:
    return [f"{m} imports {t}" for m, ts in sorted(graph.items()) if group_of(m) not in (None, "benchmarks")
            for t in sorted(ts) if group_of(t) == "benchmarks"]


def test_the_library_never_imports_benchmarks():
    assert library_imports_of_benchmarks(project_graph()) == []
    assert library_imports_of_benchmarks({"ddppo.cli": {"ddppo.benchmarks.throughput"}}) == [
        "ddppo.cli imports ddppo.benchmarks.throughput"]


def benchmark_group(module: str) -> str | None:
    """peers, speed or learning for a module of one of benchmarks/' groups; None otherwise (cli, common, ...)."""
    parts = module.split(".")
    return parts[2] if parts[:2] == ["ddppo", "benchmarks"] and len(parts) > 3 else None


def benchmark_group_crossings(graph: dict[str, set[str]]) -> list[str]:
    return [f"{m} imports {t}" for m, ts in sorted(graph.items()) if benchmark_group(m)
            for t in sorted(ts) if benchmark_group(t) not in (None, benchmark_group(m))]


def test_the_benchmark_groups_stand_side_by_side():
    """A benchmark imports its own group and what they share (ddppo.benchmarks.common), never another group."""
    graph = project_graph()
    assert {benchmark_group(m) for m in graph} == {None, "peers", "speed", "learning"}
    assert benchmark_group_crossings(graph) == []
    assert benchmark_group_crossings({"ddppo.benchmarks.learning.a": {"ddppo.benchmarks.speed.b",
                                                                       "ddppo.benchmarks.common"}}) == [
        "ddppo.benchmarks.learning.a imports ddppo.benchmarks.speed.b"]


def test_ddppo_has_no_import_cycle():
    graph = project_graph()
    ddppo = {m: {t for t in ts if t.split(".")[0] == "ddppo" and not is_envs(t)} for m, ts in graph.items()
             if m.startswith("ddppo") and not is_envs(m)}
    cycle = find_cycle(ddppo)
    assert cycle is None, f"import cycle: {' -> '.join(cycle)}"


def test_layers_run_one_way():
    assert not layer_violations(project_graph())


# what the training builder assembles: the loop sees each through an interface of its own (train/loop.py)
CONCRETE_PARTS = ("ddppo.envs", "ddppo.model", "ddppo.rollout", "ddppo.normalization", "ddppo.advantage", "ddppo.ppo",
                  "ddppo.checkpoint", "ddppo.rundir", "ddppo.eval", "ddppo.train.builder", "ddppo.train.phases",
                  "ddppo.train.learning", "ddppo.train.overlap_learning", "ddppo.train.progress",
                  "ddppo.train.metrics", "ddppo.train.wandb_sink", "ddppo.train.startup", "ddppo.train.bottleneck")


def concrete_imports(graph: dict[str, set[str]], module: str) -> list[str]:
    return sorted(t for t in graph[module] if any(t == c or t.startswith(c + ".") for c in CONCRETE_PARTS))


def test_the_loop_imports_no_concrete_part():
    """train/loop.py only iterates over what train/builder.py made: it imports none of the parts."""
    graph = project_graph()
    assert concrete_imports(graph, "ddppo.train.loop") == []
    assert "ddppo.train.loop" in graph["ddppo.train.builder"]  # the builder hands the parts to it
    assert concrete_imports({"ddppo.train.loop": {"ddppo.rollout.collector", "ddppo.timing"}}, "ddppo.train.loop") == [
        "ddppo.rollout.collector"]


@pytest.mark.parametrize("graph, cycle", [
    ({"ddppo.envs.a": {"ddppo.envs.b"}, "ddppo.envs.b": {"ddppo.envs.c"}, "ddppo.envs.c": {"ddppo.envs.a"}}, True),
    ({"ddppo.envs.a": {"ddppo.envs.b"}, "ddppo.envs.b": {"ddppo.envs.c"}, "ddppo.envs.c": set()}, False),
])
def test_the_cycle_check_can_fail(graph, cycle):
    assert (find_cycle(graph) is not None) == cycle


def test_the_layer_check_can_fail():
    graph = {"ddppo.rollout.collector": {"ddppo.train.builder", "ddppo.model.policy", "ddppo.config"},
             "ddppo.train.builder": {"ddppo.eval.runner"}, "ddppo.config": {"ddppo.envs.registry"},
             "ddppo.cli": {"ddppo.benchmarks.throughput"},
             "ddppo.interop.habitat_checkpoint": {"ddppo.model.habitat_baselines", "ddppo.export.habitat_baselines"},
             "ddppo.export.habitat_baselines": {"ddppo.model.habitat_baselines", "ddppo.eval.command"}}
    assert layer_violations(graph) == [
        "ddppo.cli (cli) imports ddppo.benchmarks.throughput (benchmarks)",
        "ddppo.export.habitat_baselines (export) imports ddppo.eval.command (eval)",
        "ddppo.interop.habitat_checkpoint (infrastructure) imports ddppo.export.habitat_baselines (export)",
        "ddppo.interop.habitat_checkpoint (infrastructure) imports ddppo.model.habitat_baselines (model)",
        "ddppo.rollout.collector (rollout) imports ddppo.train.builder (train)",
        "ddppo.train.builder (train) imports ddppo.eval.runner (eval)",
    ]


def test_imports_are_resolved_to_modules():
    graph = project_graph()
    assert "ddppo.model.actor_critic" in graph["ddppo.rollout.acting"]
    assert "ddppo.checkpoint" in graph["ddppo.eval.runner"]  # `from ddppo import checkpoint as ckpt`


# ------------------------------------------------------------------ the maps that name every module
def ddppo_modules() -> list[Path]:
    return [p.relative_to(REPO / "ddppo") for p in sorted((REPO / "ddppo").rglob("*.py"))
            if p.name not in ("__init__.py", "__main__.py")]


def map_entries(text: str) -> dict[str, str]:
    """The module map of ddppo/__init__.py as {"model/": its text, "rundir.py": its text, ...}: an entry starts
    with a package (`name/`) or a root module (`name.py`) at the start of a line (indented 4 at most: deeper
    lines continue the entry above), and runs to the next one."""
    entries: dict[str, str] = {}
    current = None
    for line in text.splitlines():
        head = line.split()[0] if line.split() else ""
        starts = len(line) - len(line.lstrip()) <= 4
        if starts and (head.endswith("/") and head[:-1].isidentifier() or head.endswith(".py")
                       and head[:-3].isidentifier()):
            current = head
            entries[current] = line[len(line) - len(line.lstrip()) + len(head):]
        elif current is not None:
            entries[current] += " " + line.strip()
    return entries


def unnamed_in_module_map(doc: str, modules: list[Path]) -> list[str]:
    entries = map_entries(doc)
    return [str(m) for m in modules
            if not (str(m) in entries if len(m.parts) == 1 else m.name in entries.get(f"{m.parts[0]}/", ""))]


ARCHITECTURE_PAGE = REPO / "docs" / "design" / "architecture.md"


def unnamed_in_code_map(page: str, modules: list[Path]) -> list[str]:
    """Modules the "## Module map" table of the architecture page does not name (a row `ddppo/<module>`, or the
    package's row `ddppo/<package>/` naming the file)."""
    section = page.split("## Module map", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    return [str(m) for m in modules if not any(
        f"`ddppo/{m}`" in row or (len(m.parts) > 1 and f"`ddppo/{m.parts[0]}/`" in row.split("|")[1]
                                 and f"`{m.name}`" in row) for row in rows)]


def test_the_module_map_names_every_module():
    import ddppo

    assert unnamed_in_module_map(ddppo.__doc__, ddppo_modules()) == []
    for package in INFRASTRUCTURE_PACKAGES:  # the infrastructure packages are read as infrastructure
        assert any(group_of(m) == "infrastructure" for m in project_graph() if m.startswith(f"ddppo.{package}."))


def layers_line(layers=LAYERS) -> str:
    """The layers as the architecture page shows them: `infrastructure -> normalization -> ... -> train | eval`."""
    return " -> ".join(" | ".join(layer) for layer in layers)


def misordered_in_module_map(doc: str, layers=LAYERS) -> list[str]:
    """The layers' packages and root modules (`model/`, `cli.py`) the module map leaves out or names out of the
    layers' order."""
    index = {group: i for i, layer in enumerate(layers) for group in layer}
    named = [n for n in (head.rstrip("/").removesuffix(".py") for head in map_entries(doc)) if n in index]
    wrong = [f"{b} after {a}" for a, b in zip(named, named[1:]) if index[b] < index[a]]
    missing = sorted(g for g in index if g not in named and g not in ("infrastructure", "benchmarks"))
    return wrong + [f"{g} missing" for g in missing]


def test_the_module_map_follows_the_layers():
    import ddppo

    assert misordered_in_module_map(ddppo.__doc__) == []


def test_the_architecture_page_shows_the_layers():
    page = " ".join(ARCHITECTURE_PAGE.read_text().split())
    assert layers_line() in page, f"docs/design/architecture.md should show the layers as: {layers_line()}"


def test_the_layer_list_checks_can_fail():
    doc = "model/      policy.py\nrollout/    x.py\nnormalization/ y.py\ncli.py      z\n"
    assert misordered_in_module_map(doc, (("normalization",), ("model",), ("rollout",), ("api",), ("cli",))) == [
        "normalization after rollout", "api missing"]
    assert layers_line((("a",), ("b", "c"))) == "a -> b | c"


def test_the_architecture_page_module_map_names_every_module():
    assert unnamed_in_code_map(ARCHITECTURE_PAGE.read_text(), ddppo_modules()) == []


def unnamed_in_package_docstring(package: Path) -> list[str]:
    """Modules of `package` (a folder) its own docstring does not name, as `name.py` or as the bare `name`."""
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    words = set(doc.replace(",", " ").replace("(", " ").replace(")", " ").replace("`", " ").split())
    return sorted(p.stem for p in package.glob("*.py") if p.name != "__init__.py"
                  and p.name not in words and p.stem not in words and f"{p.stem}.py:" not in doc)


@pytest.mark.parametrize("package", ["ddppo/distributed", "envs/habitat", "envs/scenes", "ddppo/export",
                                     "ddppo/normalization", "envs/gridnav", "envs/gym", "envs/synthetic",
                                     "envs/runtime", "tools/gpu_check"])
def test_package_docstrings_that_list_their_modules_name_every_one(package):
    assert unnamed_in_package_docstring(REPO / package) == []


def test_the_map_checks_can_fail():
    doc = "model/      policy.py (the network),\n            resnet.py\nrundir.py   files\n"
    mods = [Path("model/policy.py"), Path("model/resnet.py"), Path("model/new.py"), Path("rundir.py"),
            Path("rollout/gae.py"), Path("signals.py")]
    assert unnamed_in_module_map(doc, mods) == ["model/new.py", "rollout/gae.py", "signals.py"]
    page = "## Module map\n| where | what |\n| `ddppo/model/` | `policy.py`, `resnet.py` |\n| `ddppo/rundir.py` | x |\n"
    assert unnamed_in_code_map(page, mods) == ["model/new.py", "rollout/gae.py", "signals.py"]


def test_the_package_docstring_check_can_fail(tmp_path):
    (tmp_path / "__init__.py").write_text('"""Modules: a (one), b.py (two)."""\n')
    for name in ("a", "b", "generation"):
        (tmp_path / f"{name}.py").write_text("")
    assert unnamed_in_package_docstring(tmp_path) == ["generation"]
