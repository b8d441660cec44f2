"""The generated reference pages are current, and the docs name only things that exist.

docs/reference/config.md is `ddppo config --markdown` (the field metadata `--explain` reads), docs/reference/cli.md
is `python docs/gen_cli.py` (the argparse definitions): each test fails when the committed page is stale, with the
command that regenerates it.
"""

from __future__ import annotations

import copy
import dataclasses
import re
import types

import pytest

from ddppo.config import RunConfig, fields_of
from ddppo.config.describe import markdown
from docs_helpers import DOCS, README, load_script, pages
from testutil import REPO

CONFIG_PAGE = DOCS / "reference" / "config.md"
CLI_PAGE = DOCS / "reference" / "cli.md"


def stale(committed: str, generated: str, command: str) -> str | None:
    """Why a committed generated page is stale (its first differing line and the fix), or None."""
    if committed == generated:
        return None
    old, new = committed.splitlines(), generated.splitlines()
    first = next((i for i, (a, b) in enumerate(zip(old, new)) if a != b), min(len(old), len(new)))
    return (f"line {first + 1} differs: committed {old[first] if first < len(old) else '<end>'!r}, generated "
            f"{new[first] if first < len(new) else '<end>'!r}; regenerate it: {command}")


def test_the_config_reference_is_current():
    assert stale(CONFIG_PAGE.read_text(), markdown(),
                 "ddppo config --markdown > docs/reference/config.md") is None


def test_the_config_reference_has_one_row_per_key():
    rows = [line for line in CONFIG_PAGE.read_text().splitlines() if line.startswith("| `")]
    keys = [row.split("`")[1] for row in rows]
    assert len(keys) == len(set(keys)) and set(keys) == {key for key, _ in fields_of()}


def test_the_stale_check_fails_when_a_fields_help_changes(monkeypatch):
    seed = RunConfig.__dataclass_fields__["seed"]
    changed = copy.copy(seed)
    changed.metadata = types.MappingProxyType({**seed.metadata, "help": "a new help text for run.seed"})
    monkeypatch.setitem(RunConfig.__dataclass_fields__, "seed", changed)
    assert dataclasses.fields(RunConfig)[1].metadata["help"] == "a new help text for run.seed"
    reason = stale(CONFIG_PAGE.read_text(), markdown(), "ddppo config --markdown > docs/reference/config.md")
    assert reason is not None and "a new help text for run.seed" in reason and "run.seed" in reason


def test_table_cells_survive_pipes_and_angle_brackets():
    from ddppo.config.describe import _cell

    assert _cell("auto | gloo\n   | nccl, gym:<id>") == "auto \\| gloo \\| nccl, gym:&lt;id&gt;"


def test_the_cli_reference_is_current():
    assert stale(CLI_PAGE.read_text(), load_script("gen_cli").cli_markdown(), "python docs/gen_cli.py") is None


def test_the_cli_reference_lists_every_subcommand():
    from ddppo.cli import build_parser

    gen = load_script("gen_cli")
    names = list(gen._subcommands(build_parser()))
    assert {"train", "config", "eval", "sweep", "export", "bench"} <= set(names)
    text = CLI_PAGE.read_text()
    assert [n for n in names if f"## `ddppo {n}`" not in text] == []


# ------------------------------------------------------------------ the docs name only what exists
def named_bench_subcommands(text: str) -> set[str]:
    return set(re.findall(r"ddppo bench ([a-z0-9-]+)", text))


def test_every_bench_subcommand_the_docs_name_exists():
    from ddppo.benchmarks import cli as bench_cli

    known = {*bench_cli.table(), "NAME"}
    bad = {f"{p.relative_to(REPO)}: ddppo bench {n}" for p in [README, *pages()]
           for n in named_bench_subcommands(p.read_text()) - known}
    assert not bad, sorted(bad)


REPO_PATH = re.compile(r"(?<![\w./-])((?:ddppo|envs|benchmarks|configs|slurm|tests|tools|\.ci)/[\w./-]*[\w/])"
                       r"(?![\w*-])")
FILE = re.compile(r"\.(py|sh|sbatch|yaml|json)$")
EXTERNAL = ("configs/tasks/",)  # habitat-lab's own config paths, named in its checkout


def missing_paths(text: str, files_only: bool = False) -> list[str]:
    """Repository paths a page names (`ddppo/timing.py`, `benchmarks/results/x.json`, `tests/slurm`) that do not
    exist; globs and placeholders (`*`, `<`, `NAME`) are not paths. `files_only` (for code, where `ddppo/...`
    may be a store key): only names of files (.py, .sh, .sbatch, .yaml, .json)."""
    found = []
    for path in REPO_PATH.findall(text):
        if any(c in path for c in "<{") or re.search(r"[A-Z]{3,}", path) or path.startswith(EXTERNAL):
            continue
        if files_only and not FILE.search(path):
            continue
        if not (REPO / path).exists():
            found.append(path)
    return found


def test_every_repository_path_the_docs_and_docstrings_name_exists():
    docs = [README, *pages()]
    code = [*sorted((REPO / "ddppo").rglob("*.py")), *sorted((REPO / "envs").rglob("*.py")),
            *sorted((REPO / "benchmarks").rglob("*.py")), *sorted((REPO / "tools").rglob("*.py"))]
    bad = [f"{p.relative_to(REPO)}: {path}" for p in docs for path in missing_paths(p.read_text())]
    bad += [f"{p.relative_to(REPO)}: {path}" for p in code for path in missing_paths(p.read_text(), files_only=True)]
    assert not bad, bad


@pytest.mark.parametrize("text, missing", [
    ("see benchmarks/timing_overhead.py and ddppo/timing.py", ["benchmarks/timing_overhead.py"]),
    ("runs/x, `configs/sweeps/*.yaml`, `configs/habitat_lab_*.yaml`, tests/slurm, ddppo/<module>.py", []),
    ("configs/tasks/pointnav.yaml of a habitat-lab checkout; envs/nope/", ["envs/nope/"]),
])
def test_the_path_check_can_fail(text, missing):
    assert missing_paths(text) == missing


def test_readme_links_point_at_files():
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README.read_text())
    assert links and [link for link in links if not link.startswith("http") and not (REPO / link).exists()] == []
