"""Helpers of the documentation tests: the pages, their code blocks, and the generator scripts beside them."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

from testutil import REPO

DOCS = REPO / "docs"
README = REPO / "README.md"
CI_RUN = REPO / ".ci" / "run"

# Pages in mkdocs.yml's nav that other engineers write in their own branches (issue 31). Until each has landed,
# the site-build test stands a one-line stub in for it in a copy of docs/; `.ci/run`'s `mkdocs build --strict`
# on the real tree has no stubs, so a nav entry whose page never landed still fails CI. Remove an entry once its
# page is in main (the test says which ones are there already).
PENDING_PAGES = (
    "guides/run-directory-safety.md",
)


def pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def code_blocks(text: str, languages: tuple[str, ...] = ("bash",)) -> list[str]:
    """The bodies of the fenced code blocks of `text` in `languages`."""
    return [m.group(2) for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.M | re.S) if m.group(1) in languages]


def commands(block: str) -> list[str]:
    """The commands of a bash block: one per line, `\\` continuations joined, comments dropped."""
    out, current = [], ""
    for line in block.splitlines():
        line = line.split("  #", 1)[0].rstrip() if not line.lstrip().startswith("#") else ""
        if line.endswith("\\"):
            current += line[:-1].strip() + " "
            continue
        current += line.strip()
        if current:
            out.append(current)
        current = ""
    return out


def load_script(name: str) -> ModuleType:
    """A generator script of docs/ (`gen_cli`, `make_plots`) as a module."""
    spec = importlib.util.spec_from_file_location(f"docs_{name}", DOCS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
