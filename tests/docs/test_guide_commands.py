"""Guide commands are true as written: each `ddppo train` of these guides names its run directory and its budget
(none inherits a config's default budget or a run dir another command of the guide, or the README's, already
filled, which a resume would refuse with `policy.rnn_type: 'transformer' -> 'gru'`)."""

from __future__ import annotations

import re

from docs_helpers import DOCS, code_blocks, commands

GUIDES = ["transformer.md", "imitation.md", "environments.md", "continuous-control.md"]
README_RUN_DIR = "runs/gridnav"  # where the README's `ddppo train gridnav` writes


def train_commands(text: str) -> list[str]:
    return [c for block in code_blocks(text) for c in commands(block) if re.search(r"\bddppo train\b", c)]


def problems(guide: str, text: str) -> list[str]:
    found, dirs = [], set()
    for command in train_commands(text):
        run_dir = re.search(r"\brun\.dir=(\S+)", command)
        if run_dir is None or "run.total_env_steps=" not in command:
            found.append(f"{guide}: `{command[:80]}...` sets no run.dir or no run.total_env_steps")
            continue
        if run_dir.group(1) in dirs | {README_RUN_DIR}:
            found.append(f"{guide}: run.dir={run_dir.group(1)} is another command's")
        dirs.add(run_dir.group(1))
    return found


def test_every_train_command_of_the_guides_sets_its_run_dir_and_budget():
    assert all(train_commands((DOCS / "guides" / g).read_text()) for g in GUIDES)
    assert [p for g in GUIDES for p in problems(g, (DOCS / "guides" / g).read_text())] == []


def test_the_check_can_fail():
    text = ("```bash\nddppo train gridnav policy.rnn_type=transformer\n"
            "ddppo train gridnav run.dir=runs/a run.total_env_steps=10\n"
            "ddppo train gridnav run.dir=runs/a run.total_env_steps=20  # again\n"
            "ddppo train gridnav run.dir=runs/gridnav run.total_env_steps=20\n```\n")
    assert len(problems("g.md", text)) == 3
