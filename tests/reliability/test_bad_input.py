"""Bad input through the real CLI: each gives exit code 2, one `ddppo:` message naming what is wrong and
how to fix it, no traceback, and writes or overwrites nothing (the run dir, a trained one with
checkpoints, is byte-identical before and after; a fresh run dir is not created).

Then the allowed change: a non-shape key (ppo.lr) on resume continues the run and keeps the old config.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from rel_util import EMPTY_CONFIG, describe, run_cli, run_cli_many, snapshot, synthetic_overrides

PER_UPDATE = 4 * 8
TRAINED = "trained"  # the case runs on the trained run dir (which must stay byte-identical)
FRESH = "fresh"  # the case runs on a run dir that does not exist yet (which must not be created)
CORRUPT = "corrupt"  # the case runs on a copy of the trained run dir whose checkpoints are all damaged


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    """A trained run dir (2 updates, ckpt-1 and ckpt-2), a copy with damaged checkpoints, and the bad files the
    cases point at."""
    root = tmp_path_factory.mktemp("bad_input")
    res = run_cli("train", str(EMPTY_CONFIG), *synthetic_overrides(
        root / "run", **{"run.total_env_steps": 2 * PER_UPDATE, "checkpoint.interval_updates": 1}))
    assert res.returncode == 0, describe(res)
    corrupt = root / "corrupt"  # a run dir whose checkpoints are all damaged (truncated, zeroed)
    shutil.copytree(root / "run", corrupt)
    first, second = sorted((corrupt / "checkpoints").glob("ckpt-*.pt"))
    first.write_bytes(first.read_bytes()[:2000])
    second.write_bytes(bytes(second.stat().st_size))
    (root / "broken.yaml").write_text("run:\n  seed: [1, 2\nppo: {\n")
    (root / "list.yaml").write_text("- env\n- ppo\n")
    (root / "binary.yaml").write_bytes(bytes(range(256)) * 8)
    (root / "unknown_key.yaml").write_text("ppo:\n  learning_rate: 0.1\n")
    (root / "a_dir").mkdir()
    (root / "notes.pt").write_text("not a checkpoint")
    (root / "weights.pt").write_bytes(b"PK\x03\x04" + bytes(500))  # looks like a zip, is not a checkpoint
    return root


# (id, config file (relative to the workspace unless absolute), overrides, run dir, what it names, how to fix)
CASES = [
    ("unknown-key", EMPTY_CONFIG, ["ppo.bogus=1"], TRAINED, ["ppo.bogus"], ["ddppo config CONFIG"]),
    ("unknown-key-in-yaml", "unknown_key.yaml", [], TRAINED, ["unknown_key.yaml", "ppo.learning_rate"],
     ["ddppo config CONFIG"]),
    ("wrong-type-float", EMPTY_CONFIG, ["ppo.lr=fast"], TRAINED, ["ppo.lr", "fast"], ["ddppo config CONFIG"]),
    ("wrong-type-int", EMPTY_CONFIG, ["env.num_envs=2.5"], TRAINED, ["env.num_envs", "2.5"], ["Integer"]),
    ("zero-num-envs", EMPTY_CONFIG, ["env.num_envs=0"], TRAINED, ["env.num_envs=0"], ["must be > 0"]),
    ("negative-num-steps", EMPTY_CONFIG, ["rollout.num_steps=-8"], TRAINED, ["rollout.num_steps=-8"],
     ["must be > 0"]),
    ("zero-epochs", EMPTY_CONFIG, ["ppo.epochs=0"], TRAINED, ["ppo.epochs=0"], ["must be > 0"]),
    ("sync-frac-zero", EMPTY_CONFIG, ["preemption.sync_frac=0"], TRAINED, ["preemption.sync_frac=0"],
     ["must be in (0, 1]"]),
    ("sync-frac-above-one", EMPTY_CONFIG, ["preemption.sync_frac=1.5"], TRAINED, ["preemption.sync_frac=1.5"],
     ["must be in (0, 1]"]),
    ("sync-frac-negative", EMPTY_CONFIG, ["preemption.sync_frac=-0.2"], TRAINED, ["preemption.sync_frac=-0.2"],
     ["must be in (0, 1]"]),
    ("minibatches-not-dividing-envs", EMPTY_CONFIG, ["ppo.num_mini_batch=3"], TRAINED,
     ["ppo.num_mini_batch=3", "env.num_envs=4"], ["must divide"]),
    ("missing-config-file", "missing.yaml", [], TRAINED, ["missing.yaml", "does not exist"], ["pass a YAML file"]),
    ("broken-yaml", "broken.yaml", [], TRAINED, ["broken.yaml", "not valid YAML"], ["line 3"]),
    ("yaml-list-not-mapping", "list.yaml", [], TRAINED, ["list.yaml"], ["must hold a mapping of sections"]),
    ("binary-config", "binary.yaml", [], TRAINED, ["binary.yaml", "not UTF-8 text"], ["pass a YAML file"]),
    ("directory-as-config", "a_dir", [], TRAINED, ["a_dir", "is a directory"], ["pass a YAML file"]),
    ("unknown-env-name", EMPTY_CONFIG, ["env.name=gridworld"], TRAINED, ["env.name", "gridworld"],
     ["use one of", "synthetic"]),
    ("unknown-gym-id", EMPTY_CONFIG, ["env.name=gym:NoSuchEnv-v9", "ppo.num_mini_batch=1"], FRESH,
     ["NoSuchEnv-v9"], ["gym:MODULE:ID"]),
    ("shape-change-on-resume", EMPTY_CONFIG, ["policy.hidden_size=64", "env.synthetic.obs_dim=6"], TRAINED,
     ["policy.hidden_size: 32 -> 64", "env.synthetic.obs_dim: 8 -> 6"],
     ["use a new run.dir, or set these keys back to the stored values"]),
    ("checkpoint-path-text-file", EMPTY_CONFIG, ["checkpoint.path={ws}/notes.pt"], FRESH,
     ["checkpoint.path", "notes.pt", "not a readable ddppo checkpoint"], ["pass a file that `ddppo train` wrote"]),
    ("checkpoint-path-not-a-checkpoint-zip", EMPTY_CONFIG, ["checkpoint.path={ws}/weights.pt"], FRESH,
     ["checkpoint.path", "weights.pt"], ["pass a file that `ddppo train` wrote"]),
    ("checkpoint-path-missing", EMPTY_CONFIG, ["checkpoint.path={ws}/nothing.pt"], FRESH,
     ["checkpoint.path", "nothing.pt", "does not exist"], ["pass a file that `ddppo train` wrote"]),
    ("checkpoint-path-directory", EMPTY_CONFIG, ["checkpoint.path={ws}/a_dir"], FRESH,
     ["checkpoint.path", "a_dir", "is a directory"], ["pass a file that `ddppo train` wrote"]),
    # a non-shape change that fails at start-up must not replace the trained run's config.yaml
    ("all-checkpoints-corrupt", EMPTY_CONFIG, [], CORRUPT, ["none of the 2 checkpoints", "is valid"],
     ["move them away to start afresh, or pass checkpoint.path=FILE"]),
    ("kl-ref-checkpoint-not-a-checkpoint", EMPTY_CONFIG, ["ppo.kl_ref.checkpoint={ws}/notes.pt"], TRAINED,
     ["notes.pt", "not a readable ddppo checkpoint"], []),
]


@pytest.mark.timeout(400)
def test_bad_inputs_exit_2_with_one_message_and_write_nothing(workspace: Path):
    run = workspace / "run"
    base = synthetic_overrides(run, **{"run.total_env_steps": 4 * PER_UPDATE, "checkpoint.interval_updates": 1})
    before = snapshot(workspace)
    invocations = []
    for i, (_, config, overrides, where, _, _) in enumerate(CASES):
        config = config if Path(config).is_absolute() else workspace / config
        run_dir = {TRAINED: run, CORRUPT: workspace / "corrupt"}.get(where, workspace / f"fresh-{i}")
        invocations.append(["train", str(config), *base, f"run.dir={run_dir}",
                            *[o.format(ws=workspace) for o in overrides]])
    results = run_cli_many(invocations)
    failures = []
    for (name, _, _, _, what, fix), res in zip(CASES, results):
        messages = [ln for ln in res.stderr.splitlines() if ln.startswith("ddppo:")]
        problems = []
        if res.returncode != 2:
            problems.append(f"exit code {res.returncode}")
        if "Traceback" in res.stderr or res.stdout:
            problems.append("a traceback or stdout output")
        if len(messages) != 1:
            problems.append(f"{len(messages)} 'ddppo:' messages")
        problems += [f"does not name {n!r}" for n in what if n not in res.stderr]
        problems += [f"does not say how to fix ({n!r})" for n in fix if n not in res.stderr]
        if problems:
            failures.append(f"[{name}] {'; '.join(problems)}\n{describe(res)}")
    assert not failures, "\n\n".join(failures)
    assert snapshot(workspace) == before, "a bad input wrote, created or touched something"


@pytest.mark.timeout(200)
def test_non_shape_override_on_resume_is_allowed_and_the_old_config_kept(workspace: Path, tmp_path: Path):
    from ddppo import checkpoint as ckpt
    from ddppo.config import from_yaml_text

    run = tmp_path / "run"
    shutil.copytree(workspace / "run", run)
    old_config = (run / "config.yaml").read_text()
    res = run_cli("train", str(EMPTY_CONFIG), *synthetic_overrides(
        run, **{"run.total_env_steps": 4 * PER_UPDATE, "checkpoint.interval_updates": 1, "ppo.lr": 1e-4}))
    assert res.returncode == 0, describe(res)
    assert "resumed from" in res.stderr and "ckpt-2.pt at update 2" in res.stderr, describe(res)
    changed = re.search(r"config changed since the last run \(([^)]*)\)", res.stderr)
    assert changed and "ppo.lr" in changed.group(1).split(", "), describe(res)  # (run.dir too: the copy moved)
    (kept,) = run.glob("config.*.yaml")
    assert kept.read_text() == old_config
    assert from_yaml_text((run / "config.yaml").read_text(), "config.yaml").ppo.lr == 1e-4
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in rows] == [1, 2, 3, 4]
    assert [r["loss/lr"] for r in rows[2:]] == [1e-4, 1e-4] and rows[0]["loss/lr"] == 2.5e-4
    data = ckpt.load(run / "checkpoints" / "ckpt-4.pt")
    assert data["counters"]["update"] == 4 and data["optimizer"]["param_groups"][0]["lr"] == 1e-4
