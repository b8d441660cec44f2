"""The whole input surface through the real CLI (`python -m ddppo`), table-driven: command-line arguments and
overrides, launcher variables (torchrun's and SLURM's), device and backend requests, run.dir and the other path
keys (missing, a file where a directory is wanted, unwritable, on a full disk), sizes that cannot fit in memory,
YAML shapes, sweep specs and checkpoint files.

Every case is a user error: exit code 2, exactly one `ddppo:` line (argparse's usage errors: its own `error:`
line) naming the key or variable (and, where given, the fix), no traceback, nothing written anywhere in the
workspace, and an answer within the subprocess limit (a start-up wait of dist.startup_timeout_s is a hang here).
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from rel_util import EMPTY_CONFIG, REPO, dist_harness, snapshot

LIMIT_S = 60  # far below dist.startup_timeout_s (1800 s): a case that waits for a peer that cannot come hangs
TINY = ["env.name=synthetic", "env.num_envs=4", "rollout.num_steps=8", "ppo.num_mini_batch=2", "ppo.epochs=1",
        "policy.hidden_size=16", "log.tensorboard=false", "run.torch_threads=1", "run.total_env_steps=64"]
GRIDNAV = str(REPO / "configs" / "gridnav.yaml")
E = str(EMPTY_CONFIG)

# files the cases point at, written by the fixture under the workspace ({ws})
FILES = {
    "a_file": "just text\n",
    "scalar.yaml": "3\n",
    "null_section.yaml": "ppo:\n",
    "scalar_section.yaml": "ppo: 3\n",
    "list_section.yaml": "ppo: [1, 2]\n",
    "nested_too_deep.yaml": "ppo:\n  lr:\n    value: 1\n",
    "tabs.yaml": "ppo:\n\tlr: 1\n",
    "alias_section.yaml": "a: &x {lr: 1}\nppo: *x\n",
    "sweep_scalar_grid.yaml": f"base: {E}\ngrid:\n  ppo.lr: 0.1\n",
    "sweep_empty_axis.yaml": f"base: {E}\ngrid:\n  ppo.lr: []\n",
    "sweep_unknown_key.yaml": f"base: {E}\ngrid:\n  ppo.bogus: [1, 2]\n",
    "sweep_bad_value.yaml": f"base: {E}\ngrid:\n  ppo.lr: [fast, slow]\n",
    "sweep_missing_base.yaml": "base: nowhere.yaml\ngrid:\n  ppo.lr: [1, 2]\n",
    "sweep_list_top.yaml": "- ppo.lr\n",
    "sweep_unknown_field.yaml": f"base: {E}\ngrids:\n  ppo.lr: [1, 2]\n",
    "sweep_bad_seeds.yaml": f"base: {E}\nseeds: many\n",
    "sweep_zero_ranks.yaml": f"base: {E}\nranks: 0\n",
    "empty.pt": "",
}

# (id, argv (formatted with {ws} = the workspace, {port} = a free port), extra environment, what the message
# must name). A run dir is always under the workspace ({ws}/run-<id>, which must not be created).
CASES = [
    # ---- command line
    ("no-command", [], {}, ["command"]),
    ("unknown-command", ["fly"], {}, ["fly"]),
    ("train-without-config", ["train"], {}, ["config"]),
    ("unknown-option", ["train", E, "--fast"], {}, ["--fast"]),
    ("override-without-equals", ["train", E, "ppo.lr"], {}, ["ppo.lr", "key=value"]),
    ("override-empty-key", ["train", E, "=3"], {}, ["=3"]),
    ("override-empty-value-int", ["train", E, "env.num_envs="], {}, ["env.num_envs"]),
    ("override-section-as-value", ["train", E, "ppo=3"], {}, ["ppo"]),
    ("override-into-a-value", ["train", E, "ppo.lr.x=1"], {}, ["ppo.lr"]),
    ("override-nan-lr", ["train", E, "ppo.lr=nan"], {}, ["ppo.lr"]),
    ("override-inf-lr", ["train", E, "ppo.lr=inf"], {}, ["ppo.lr"]),
    ("override-negative-lr", ["train", E, "ppo.lr=-1"], {}, ["ppo.lr"]),
    ("override-bool-garbage", ["train", E, "log.tensorboard=perhaps"], {}, ["log.tensorboard"]),
    ("override-negative-seed-threads", ["train", E, "run.torch_threads=-3"], {}, ["run.torch_threads"]),
    ("explain-unknown-key", ["config", "--explain", "ppo.bogus"], {}, ["ppo.bogus"]),
    ("config-unknown-key", ["config", E, "nope.key=1"], {}, ["nope"]),
    ("eval-missing-run-dir", ["eval", "{ws}/no_such_run"], {}, ["no_such_run"]),
    ("eval-run-dir-is-a-file", ["eval", "{ws}/a_file"], {}, ["a_file"]),
    # ---- launcher variables
    ("rank-beyond-world", ["train", E], {"RANK": "5", "WORLD_SIZE": "2"}, ["RANK=5", "WORLD_SIZE=2"]),
    ("rank-negative", ["train", E], {"RANK": "-1", "WORLD_SIZE": "2"}, ["RANK=-1"]),
    ("rank-not-a-number", ["train", E], {"RANK": "abc", "WORLD_SIZE": "2"}, ["RANK", "abc"]),
    ("world-size-zero", ["train", E], {"RANK": "0", "WORLD_SIZE": "0"}, ["WORLD_SIZE=0"]),
    ("world-size-not-a-number", ["train", E], {"RANK": "0", "WORLD_SIZE": "two"}, ["WORLD_SIZE", "two"]),
    ("local-rank-not-a-number", ["train", E], {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "x"}, ["LOCAL_RANK"]),
    ("local-rank-beyond-local-world", ["train", E], {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "3",
                                                      "LOCAL_WORLD_SIZE": "2"}, ["LOCAL_RANK=3"]),
    ("local-world-size-zero", ["train", E], {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "0"},
     ["LOCAL_WORLD_SIZE=0"]),
    ("master-port-out-of-range", ["train", E], {"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "99999"},
     ["MASTER_PORT=99999"]),
    ("master-port-not-a-number", ["train", E], {"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "http"},
     ["MASTER_PORT", "http"]),
    ("master-addr-empty", ["train", E], {"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": " ", "MASTER_PORT": "{port}"},
     ["MASTER_ADDR"]),
    ("slurm-procid-beyond-tasks", ["train", E], {"SLURM_PROCID": "3", "SLURM_STEP_NUM_TASKS": "2"},
     ["SLURM_PROCID=3", "SLURM_STEP_NUM_TASKS=2"]),
    ("slurm-tasks-not-a-number", ["train", E], {"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "lots"},
     ["SLURM_STEP_NUM_TASKS", "lots"]),
    ("slurm-bad-nodelist", ["train", E], {"SLURM_PROCID": "1", "SLURM_STEP_NUM_TASKS": "2",
                                          "SLURM_JOB_NODELIST": "gpu[03"}, ["SLURM_JOB_NODELIST"]),
    ("slurm-job-id-not-a-number", ["train", E], {"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "2",
                                                 "SLURM_JOB_ID": "abc"}, ["SLURM_JOB_ID", "abc"]),
    # ---- device and backend
    # (an explicit dist.device=cuda / dist.backend=nccl without CUDA belongs to the GPU start-up checks)
    ("device-unknown", ["train", E, "dist.device=tpu"], {}, ["dist.device"]),
    ("backend-unknown", ["train", E, "dist.backend=mpi"], {}, ["dist.backend"]),
    # ---- run.dir and path keys
    ("run-dir-is-a-file", ["train", E, "run.dir={ws}/a_file"], {}, ["run.dir", "a_file"]),
    ("run-dir-under-a-file", ["train", E, "run.dir={ws}/a_file/run"], {}, ["run.dir", "a_file"]),
    ("run-dir-empty", ["train", E, "run.dir="], {}, ["run.dir"]),
    ("run-dir-unwritable", ["train", E, "run.dir={ro}/run"], {}, ["run.dir", "writ"]),
    ("run-dir-on-a-full-disk", ["train", E, "run.dir={full}/run"], {}, ["run.dir", "space"]),
    ("checkpoint-path-empty-file", ["train", E, "checkpoint.path={ws}/empty.pt"], {}, ["checkpoint.path", "empty.pt"]),
    ("kl-ref-checkpoint-missing", ["train", E, "ppo.kl_ref.checkpoint={ws}/none.pt"], {}, ["none.pt"]),
    ("habitat-dataset-not-episodes", ["train", E, "env.name=habitat_pointnav", "env.habitat.dataset={ws}/a_file"],
     {}, ["a_file"]),
    ("habitat-episodes-missing", ["train", E, "env.name=habitat_pointnav",
                                  "env.habitat.dataset={ws}/none.json.gz"], {}, ["none.json.gz"]),
    # ---- sizes that cannot fit in memory (refused before allocating, with the size they need)
    ("num-envs-huge", ["train", E, "env.num_envs=1000000000", "ppo.num_mini_batch=1"], {}, ["env.num_envs", "GiB"]),
    ("num-steps-huge", ["train", E, "rollout.num_steps=4000000000"], {}, ["rollout.num_steps", "GiB"]),
    ("hidden-size-huge", ["train", E, "policy.hidden_size=10000000"], {}, ["policy.hidden_size", "GiB"]),
    # the env's own sizes carry ranges: refused by key before the env allocates
    ("obs-dim-huge", ["train", E, "env.synthetic.obs_dim=100000000000"], {}, ["env.synthetic.obs_dim"]),
    # ---- YAML shapes
    ("yaml-scalar-document", ["train", "{ws}/scalar.yaml"], {}, ["scalar.yaml"]),
    ("yaml-null-section", ["train", "{ws}/null_section.yaml"], {}, ["ppo"]),
    ("yaml-scalar-section", ["train", "{ws}/scalar_section.yaml"], {}, ["ppo"]),
    ("yaml-list-section", ["train", "{ws}/list_section.yaml"], {}, ["ppo"]),
    ("yaml-value-as-section", ["train", "{ws}/nested_too_deep.yaml"], {}, ["ppo.lr"]),
    ("yaml-tabs", ["train", "{ws}/tabs.yaml"], {}, ["tabs.yaml"]),
    ("yaml-unknown-top-key-via-alias", ["train", "{ws}/alias_section.yaml"], {}, ["a"]),
    # ---- sweep specs
    ("sweep-missing-spec", ["sweep", "{ws}/none.yaml", "--dry-run"], {}, ["none.yaml"]),
    ("sweep-scalar-axis", ["sweep", "{ws}/sweep_scalar_grid.yaml", "--dry-run"], {}, ["ppo.lr"]),
    ("sweep-empty-axis", ["sweep", "{ws}/sweep_empty_axis.yaml", "--dry-run"], {}, ["ppo.lr"]),
    ("sweep-unknown-key", ["sweep", "{ws}/sweep_unknown_key.yaml", "--dry-run"], {}, ["ppo.bogus"]),
    ("sweep-bad-value", ["sweep", "{ws}/sweep_bad_value.yaml", "--dry-run"], {}, ["ppo.lr"]),
    ("sweep-missing-base", ["sweep", "{ws}/sweep_missing_base.yaml", "--dry-run"], {}, ["nowhere.yaml"]),
    ("sweep-list-document", ["sweep", "{ws}/sweep_list_top.yaml", "--dry-run"], {}, ["sweep_list_top.yaml"]),
    ("sweep-unknown-field", ["sweep", "{ws}/sweep_unknown_field.yaml", "--dry-run"], {}, ["grids"]),
    ("sweep-bad-seeds", ["sweep", "{ws}/sweep_bad_seeds.yaml", "--dry-run"], {}, ["seeds"]),
    ("sweep-zero-ranks", ["sweep", "{ws}/sweep_zero_ranks.yaml", "--dry-run"], {}, ["ranks"]),
    ("sweep-max-parallel-zero", ["sweep", "{ws}/sweep_empty_axis.yaml", "--max-parallel", "0", "--dry-run"], {},
     ["max-parallel"]),
    ("sweep-summary-missing-dir", ["sweep", "summary", "{ws}/no_sweep"], {}, ["no_sweep"]),
]


def _mount(kind: str, target: Path) -> bool:
    target.mkdir()
    opts = {"ro": "ro,size=1m", "full": "size=64k"}[kind]
    ok = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(target)], capture_output=True,
                        timeout=30).returncode == 0
    if ok and kind == "full":
        fd = os.open(target / "filler", os.O_WRONLY | os.O_CREAT)  # every block taken
        try:
            while os.write(fd, bytes(4096)):
                pass
        except OSError:
            pass
        finally:
            os.close(fd)
    return ok


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    root = tmp_path_factory.mktemp("surface")
    for name, text in FILES.items():
        (root / name).write_text(text)
    mounts = {kind: root / f"mnt-{kind}" for kind in ("ro", "full")}
    mounted: dict[str, bool] = {}
    try:
        for kind, path in mounts.items():
            mounted[kind] = _mount(kind, path)
        yield root, {k: (p if mounted[k] else None) for k, p in mounts.items()}
    finally:
        for kind, path in mounts.items():
            if os.path.ismount(path):
                subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=30)


def run_case(argv: list[str], env_extra: dict[str, str]) -> subprocess.CompletedProcess | None:
    env = dist_harness.subprocess_env(**env_extra)
    try:
        return subprocess.run([sys.executable, "-m", "ddppo", *argv], cwd=REPO, env=env, capture_output=True,
                              text=True, timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        return None


def problems_of(res: subprocess.CompletedProcess | None, names: list[str]) -> list[str]:
    if res is None:
        return [f"no answer within {LIMIT_S} s (a hang)"]
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith(("ddppo:", "ddppo: error:", "usage:"))]
    message = [ln for ln in lines if not ln.startswith("usage:")]
    found = []
    if res.returncode != 2:
        found.append(f"exit code {res.returncode}")
    if "Traceback" in res.stderr:
        found.append("a traceback")
    if len(message) != 1:
        found.append(f"{len(message)} message lines")
    found += [f"does not name {n!r}" for n in names if n not in "\n".join(message)]
    return found


@pytest.mark.timeout(900)
def test_every_bad_input_is_refused_in_one_line_with_exit_2_and_nothing_written(workspace):
    root, mounts = workspace
    port = str(dist_harness.free_port())
    runnable = [c for c in CASES if not ("{ro}" in " ".join(c[1]) and mounts["ro"] is None)
                and not ("{full}" in " ".join(c[1]) and mounts["full"] is None)]
    before = snapshot(root)

    def one(case):
        name, argv, env_extra, _ = case
        fmt = {"ws": root, "port": port, "ro": mounts["ro"], "full": mounts["full"]}
        argv = [a.format(**fmt) for a in argv]
        if argv[:1] == ["train"] and not any(a.startswith("run.dir=") for a in argv):
            argv += [f"run.dir={root}/run-{name}"]
        return run_case([*argv[:1], *argv[1:2], *TINY, *argv[2:]] if argv[:1] == ["train"] and len(argv) > 1
                        else argv, {k: v.format(port=port) for k, v in env_extra.items()})

    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(one, runnable))
    failures = []
    for (name, argv, env_extra, names), res in zip(runnable, results):
        found = problems_of(res, names)
        if found:
            tail = "" if res is None else f"rc={res.returncode}\n{res.stderr[-1500:]}"
            failures.append(f"[{name}] {'; '.join(found)}\n{tail}")
    print(f"{len(runnable)} cases ({len(CASES) - len(runnable)} skipped: no tmpfs); {len(failures)} failed")
    assert not failures, f"{len(failures)} of {len(runnable)} cases:\n\n" + "\n\n".join(failures)
    assert snapshot(root) == before, "a bad input wrote, created or touched something in the workspace"
