"""Placement by measured cost for habitat and habitat-lab (issue 44): each scene's env step time measured per episode,
kept in the run directory's scene_costs.json, and the episode split that deals whole scenes by it.

Timings are scripted (the envs' StepClock reads a counter the stand-in simulators advance by their scene's cost), so
every figure below is exact; nothing asserts on real time.
"""

from __future__ import annotations

import itertools
import json
import types

import numpy as np
import pytest

from ddppo.envs.base import EnvError, EnvSpec
from ddppo.field_metadata import section_problems
from ddppo.envs.habitat.env import HabitatPointNavEnv
from ddppo.envs.habitat.options import HabitatOptions
from ddppo.envs.habitat_lab.env import load_share
from ddppo.envs.habitat_lab.options import HabitatLabOptions
from ddppo.envs.placement import group_costs, measured_costs, read_scene_costs, scene_costs
from ddppo.envs.scenes.dataset import (Episode, Goal, experience_shares, group_runs, read_partition, scene_name,
                                       write_split)
from ddppo.rollout.scenes import SCENE_COLUMNS, SceneTally, scene_scalars
from ddppo.rundir import RunDir
from ddppo.train.scene_costs import SceneCosts
from habitat_testutil import HabitatLabStandIn

COST = {"gen_000": 0.002, "gen_001": 0.006}  # scripted seconds per env step of each generated scene


def _scripted(env: HabitatPointNavEnv) -> None:
    """Each task's step advances the env's clock by the cost of the scene it plays."""
    now = [0.0]
    env.step_clock.clock = lambda: now[0]
    for task in env._tasks:
        def step(action, task=task, inner=task.step):
            now[0] += COST[scene_name(task.episode.scene_id)]
            return inner(action)
        task.step = step


def test_the_env_times_each_scene_per_episode_and_the_tally_gives_its_step_ms(make_options):
    """Two envs, one per scene (world size 1: the group's episodes by scene, cut in two); episodes truncated at 5
    steps report 5 x their scene's step cost, and train/scene/<name>/step_ms is that cost in ms."""
    env = HabitatPointNavEnv(make_options(max_episode_steps=5), EnvSpec(num_envs=2, seed=0))
    try:
        _scripted(env)
        env.reset()
        tally = SceneTally(("gen_000", "gen_001"), env)
        table = tally.zeros()
        finished = []
        for _ in range(10):
            res = env.step(np.ones(2, np.int64))  # MOVE_FORWARD: never STOP
            tally.add_episodes(res.episodes, table, 0)
            finished += res.episodes
    finally:
        env.close()
    assert len(finished) == 4
    for ep in finished:
        assert ep.step_s == pytest.approx(5 * COST[ep.scene])
    out = scene_scalars(("gen_000", "gen_001"), table)
    assert out["train/scene/gen_000/step_ms"] == pytest.approx(2.0)
    assert out["train/scene/gen_001/step_ms"] == pytest.approx(6.0)


def test_an_env_that_does_not_time_its_steps_logs_no_step_ms():
    table = np.zeros((1, len(SCENE_COLUMNS)))
    tally = SceneTally(("a",), types.SimpleNamespace(num_envs=1, env_scenes=["a"]))
    from ddppo.envs.base import EpisodeInfo

    tally.add_episodes([EpisodeInfo(0, {"return": 1.0, "length": 4.0}, "a")], table, 3)
    assert "train/scene/a/step_ms" not in scene_scalars(("a",), table) and table[0, 2] == 1


def test_a_per_scene_window_saved_before_the_step_columns_resumes():
    """A checkpoint of the 8 columns before step_s / step_n: its window is restored, the new columns zero."""
    from ddppo.train.stats import SceneWindow

    window = SceneWindow(("a", "b"), 4)
    window.load_state_dict({"names": ["a", "b"], "tables": [np.ones((2, 8))]})
    assert window.tables[0].shape == (2, len(SCENE_COLUMNS)) and window.tables[0][:, 8:].sum() == 0


def _table(step_s: list[float], step_n: list[float]) -> np.ndarray:
    table = np.zeros((len(step_s), len(SCENE_COLUMNS)))
    table[:, SCENE_COLUMNS.index("step_s")] = step_s
    table[:, SCENE_COLUMNS.index("step_n")] = step_n
    return table


def test_the_costs_are_written_by_rank_0_and_read_back(tmp_path):
    """Summed over updates, written atomically as {scene: seconds per step}; scenes this job did not time keep the
    file's earlier cost; the file reads back as the costs an env places by."""
    run = RunDir(tmp_path / "run")
    run.write_scene_costs({"old": 0.5, "b": 9.0})
    costs = SceneCosts(("a", "b", "c"), run, writes=True)
    costs.add(_table([0.2, 0.9, 0.0], [100, 100, 0]))
    costs.add(_table([0.2, 0.3, 0.0], [100, 200, 0]))
    costs.save()
    assert json.loads(run.scene_costs_path.read_text()) == pytest.approx({"a": 0.002, "b": 0.004, "old": 0.5})
    assert read_scene_costs(str(run.scene_costs_path), "env.habitat.scene_costs") == pytest.approx(
        {"a": 0.002, "b": 0.004, "old": 0.5})
    other = RunDir(tmp_path / "rank1")
    SceneCosts(("a",), other, writes=False).save()
    assert not other.scene_costs_path.exists()


def _episodes(counts: list[int]) -> list[Episode]:
    return [Episode(f"{s}-{j}", f"gen/s{s}.glb", [0.0, 0.0, 0.0], [0, 0, 0, 1], [Goal([1.0, 0.0, 0.0], 0.2)])
            for s, n in enumerate(counts) for j in range(n)]


def _summed(runs_of_groups: list[list[tuple]], costs: list[float]) -> list[float]:
    return group_costs([[s for s, _, _ in runs] for runs in runs_of_groups], costs)


def test_the_split_by_cost_equalises_the_groups_summed_cost():
    """Scenes dealt whole in order put the two slow scenes in one group; by cost, each group gets one of them."""
    counts, costs = [6, 6, 6, 6], [1.0, 1.0, 3.0, 3.0]
    by_order = [group_runs(counts, 2, g, 2, "scenes") for g in range(2)]
    by_cost = [group_runs(counts, 2, g, 2, "cost", costs) for g in range(2)]
    assert _summed(by_order, costs) == [2.0, 6.0]
    assert _summed(by_cost, costs) == [4.0, 4.0]
    assert sorted(s for runs in by_cost for s, a, b in runs if (a, b) == (0, 6)) == [0, 1, 2, 3]  # whole scenes
    # 6 scenes over 3 groups: every group the same summed cost
    costs6 = [5.0, 4.0, 3.0, 3.0, 2.0, 1.0]
    three = [group_runs([4] * 6, 3, g, 2, "cost", costs6) for g in range(3)]
    assert _summed(three, costs6) == [6.0, 6.0, 6.0]
    # where whole scenes would leave a group fewer episodes than envs, or the scenes are fewer than the groups,
    # the episodes are cut evenly as for episode_split=scenes
    assert group_runs([1, 7], 2, 0, 2, "cost", [1.0, 1.0]) == group_runs([1, 7], 2, 0, 2, "scenes")
    assert group_runs([8], 2, 1, 2, "cost", [1.0]) == [(0, 4, 8)]
    assert experience_shares([6, 6, 6, 6], 2, 2, "cost", costs) == pytest.approx([0.25] * 4)
    with pytest.raises(ValueError, match="one cost per scene"):
        group_runs(counts, 2, 0, 2, "cost")


@pytest.mark.parametrize("countable", [True, False])
def test_every_group_reads_the_same_placement_from_a_split_folder(tmp_path, monkeypatch, countable):
    """read_partition (habitat) places whole scene files by the costs, the same in every group, whether it counts
    the episodes or deals the files alone (large datasets); a scene without a cost gets the median."""
    from ddppo.envs.scenes import dataset

    if not countable:
        monkeypatch.setattr(dataset, "COUNT_LIMIT_BYTES", 0)
    folder = tmp_path / "train"
    write_split(str(folder), _episodes([4, 4, 4, 4]))
    costs = {"s0": 1.0, "s1": 2.0, "s2": 3.0}  # s3 unmeasured: the median, 2.0; in order the groups cost 3 and 5
    parts = [read_partition(str(folder), 2, g, num_envs=2, split="cost", costs=costs) for g in range(2)]
    scenes = [sorted({scene_name(e.scene_id) for e in p}) for p in parts]
    assert scenes == [["s0", "s2"], ["s1", "s3"]]
    assert sorted(e.episode_id for p in parts for e in p) == sorted(e.episode_id for e in _episodes([4] * 4))


@pytest.mark.parametrize("countable", [True, False])
def test_habitat_lab_places_whole_scenes_by_cost(tmp_path, monkeypatch, countable):
    from ddppo.envs.habitat_lab import env as hl_env

    if not countable:
        monkeypatch.setattr(hl_env, "episodes_by_scene", lambda api, cfg, scenes: None)
    (tmp_path / "val.json.gz").write_text("")
    cfg = {"data_path": str(tmp_path / "{split}.json.gz"), "split": "val", "scenes_dir": str(tmp_path)}
    api = HabitatLabStandIn(_episodes([4, 4, 4, 4]))
    costs = {"s0": 3.0, "s1": 3.0, "s2": 1.0, "s3": 1.0}
    mine = {}
    for rank, worker in itertools.product(range(2), range(1)):
        spec = types.SimpleNamespace(rank=rank, world_size=2, worker_index=worker, worker_count=1, num_envs=2)
        mine[rank] = sorted({scene_name(e.scene_id) for e in load_share(api, cfg, spec, "cost", costs)[1]})
    assert mine == {0: ["s0", "s2"], 1: ["s1", "s3"]}


def test_scenes_without_a_measured_cost_get_the_median():
    assert scene_costs(["a", "b", "c", "d"], {"a": 1.0, "b": 2.0, "c": 4.0}) == [1.0, 2.0, 4.0, 2.0]
    assert scene_costs(["a", "b"], {}) == [1.0, 1.0]
    # habitat-lab lists HM3D scenes by folder (00800-TEE...), their episodes' files (and train/scene/*) by stem
    assert scene_costs(["00800-TEEsavR23oF", "00801-x", "ab"], {"TEEsavR23oF": 3.0, "x": 1.0, "b": 9.0}) == [
        3.0, 1.0, 2.0]


@pytest.mark.parametrize("content,why", [(None, "no such file"), ("{", "not readable JSON"),
                                         ("[1, 2]", "holds a JSON list"), ('{"a": -1}', "'a' is not a number > 0"),
                                         ('{"a": NaN}', "'a' is not a number > 0"), ('{"a": "x"}', "not a number")])
def test_a_bad_cost_file_is_one_line_naming_the_file_and_the_fix(tmp_path, content, why):
    path = tmp_path / "costs.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(EnvError) as err:
        measured_costs(str(path), "", "env.habitat.scene_costs")
    message = str(err.value)
    assert "\n" not in message and why in message
    assert message.startswith(f"env.habitat.scene_costs={path}") and "give env.habitat.scene_costs a JSON" in message
    with pytest.raises(EnvError, match=r"the run directory's .* \(read as env.habitat.scene_costs is unset\).*delete"):
        measured_costs("", str(path), "env.habitat.scene_costs")


def test_no_costs_yet_places_every_scene_alike_and_a_named_file_needs_the_cost_split(tmp_path):
    assert measured_costs("", "", "env.habitat.scene_costs") == {}
    assert section_problems(HabitatOptions(dataset="x", scene_costs="c.json", episode_split="scenes")) == [
        "scene_costs=c.json is used only with episode_split=cost (now scenes): set env.habitat.episode_split=cost "
        "or leave scene_costs empty"]
    assert section_problems(HabitatOptions(dataset="x", scene_costs="c.json")) == []  # cost: habitat's default
    assert section_problems(HabitatLabOptions(config="x", scene_costs="c.json", episode_split="episodes"))[0].startswith(
        "scene_costs=c.json")


def test_the_env_reads_the_run_directorys_costs_and_a_changed_placement_starts_fresh_episodes(make_options, tmp_path):
    """A resumed run's envs place by the run directory's file when the options name none; a saved env state of
    another placement is refused (the collector then starts fresh episodes) rather than restored onto other
    episodes."""
    costs = tmp_path / "scene_costs.json"
    costs.write_text(json.dumps({"gen_000": 0.001, "gen_001": 0.004}))
    spec = EnvSpec(num_envs=1, seed=0, world_size=2, rank=0, scene_costs=str(costs))
    env = HabitatPointNavEnv(make_options(episode_split="cost"), spec)
    try:
        state = env.state_dict()
        assert {scene_name(e.scene_id) for e in env._episodes} == {"gen_001"}  # the costlier first (in order: gen_000)
    finally:
        env.close()
    other = HabitatPointNavEnv(make_options(episode_split="cost"), EnvSpec(num_envs=1, seed=0, world_size=2, rank=1,
                                                                           scene_costs=str(costs)))
    try:
        assert {scene_name(e.scene_id) for e in other._episodes} == {"gen_000"}
        with pytest.raises(EnvError, match="other episodes per env"):
            other.load_state_dict(state)
    finally:
        other.close()
    with pytest.raises(EnvError, match="env.habitat.scene_costs=.*missing.json: no such file"):
        HabitatPointNavEnv(make_options(episode_split="cost", scene_costs=str(tmp_path / "missing.json")), spec)


def test_a_run_keeps_its_scene_costs_and_a_resume_places_by_them(generated, tmp_path):
    """The real CLI on the grid double: training logs train/scene/<name>/step_ms and writes scene_costs.json at its
    checkpoint; a resume with episode_split=cost reads that file (a malformed one is one line, exit 2, naming it),
    and a named file that is missing is one line too."""
    import os
    import subprocess
    import sys

    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    run = tmp_path / "run"

    def train(*extra: str) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "ddppo", "train", os.path.join(repo, "configs", "pointnav_habitat_cpu.yaml"),
               "env.habitat.backend=grid", f"env.habitat.dataset={generated['dataset']}",
               f"env.habitat.scenes_dir={generated['scenes_dir']}", f"run.dir={run}", "env.num_envs=2",
               "env.habitat.depth_width=16", "env.habitat.depth_height=16", "env.habitat.max_episode_steps=4",
               "rollout.num_steps=8", "policy.hidden_size=16", "policy.resnet_base_width=4", "log.tensorboard=false",
               *extra]
        return subprocess.run(cmd, cwd=repo, capture_output=True, text=True, timeout=300)

    first = train("run.total_env_steps=32")
    assert first.returncode == 0, first.stderr[-3000:]
    costs = json.loads((run / "scene_costs.json").read_text())
    assert sorted(costs) == ["gen_000", "gen_001"] and all(v > 0 for v in costs.values())
    last = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()][-1]
    assert last["train/scene/gen_000/step_ms"] > 0 and last["train/scene/gen_001/step_ms"] > 0

    (run / "scene_costs.json").write_text('{"gen_000": "slow"}')
    bad = train("run.total_env_steps=48", "env.habitat.episode_split=cost")
    assert bad.returncode == 2
    lines = [line for line in bad.stderr.splitlines() if line.startswith("ddppo:")]
    assert len(lines) == 1 and f"the run directory's {run / 'scene_costs.json'}" in lines[0], bad.stderr[-2000:]
    missing = train("run.total_env_steps=48", "env.habitat.episode_split=cost",
                    f"env.habitat.scene_costs={tmp_path / 'none.json'}")
    assert missing.returncode == 2 and "none.json: no such file" in missing.stderr, missing.stderr[-2000:]

    (run / "scene_costs.json").write_text(json.dumps(costs))
    resumed = train("run.total_env_steps=48", "env.habitat.episode_split=cost")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert sorted(json.loads((run / "scene_costs.json").read_text())) == ["gen_000", "gen_001"]


def test_eval_of_a_run_placed_by_a_cost_file_that_is_gone_places_alike(generated, tmp_path):
    """The costs place training's scenes for speed; `ddppo eval` of the run does not need them, so a run trained
    with env.habitat.scene_costs=PATH evaluates after PATH is gone (it exited 2 at env build)."""
    import os
    import subprocess
    import sys

    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    run, costs = tmp_path / "run", tmp_path / "costs.json"
    costs.write_text(json.dumps(COST))
    common = ["env.habitat.backend=grid", f"env.habitat.dataset={generated['dataset']}",
              f"env.habitat.scenes_dir={generated['scenes_dir']}", "env.num_envs=2", "env.habitat.depth_width=16",
              "env.habitat.depth_height=16", "env.habitat.max_episode_steps=4", "log.tensorboard=false"]
    trained = subprocess.run(
        [sys.executable, "-m", "ddppo", "train", os.path.join(repo, "configs", "pointnav_habitat_cpu.yaml"), *common,
         f"run.dir={run}", "rollout.num_steps=8", "policy.hidden_size=16", "policy.resnet_base_width=4",
         "run.total_env_steps=16", "env.habitat.episode_split=cost", f"env.habitat.scene_costs={costs}"],
        cwd=repo, capture_output=True, text=True, timeout=300)
    assert trained.returncode == 0, trained.stderr[-3000:]
    costs.unlink()
    evaluated = subprocess.run([sys.executable, "-m", "ddppo", "eval", str(run), "eval.num_episodes=2",
                                "log.tensorboard=false"], cwd=repo, capture_output=True, text=True, timeout=300)
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    assert sorted((run / "eval").glob("ckpt-*.json"))


def test_a_saved_state_restores_its_placement_and_an_older_one_is_refused_with_workers_usable(make_options, tmp_path):
    """A resume whose measured costs would place other scenes on a worker: the saved state carries the costs its
    placement used, so the workers place as they were and continue the saved episodes. A state saved before
    placements were saved (no `placed_by`) is refused (one EnvError; the collector then starts fresh episodes) and
    the workers keep serving, instead of breaking."""
    import dataclasses

    from ddppo.envs.registry import make_vec_env

    def env_with(costs: dict[str, float]):
        path = tmp_path / f"costs-{len(list(tmp_path.iterdir()))}.json"
        path.write_text(json.dumps(costs))
        options = dataclasses.asdict(make_options(episode_split="cost", scene_costs=str(path)))
        return make_vec_env("habitat_pointnav", options, EnvSpec(num_envs=2, seed=0, num_workers=2))

    first = env_with({"gen_000": 1.0, "gen_001": 3.0})
    try:
        first.reset()
        state, scenes = first.state_dict(), list(first.env_scenes)
    finally:
        first.close()
    second = env_with({"gen_000": 3.0, "gen_001": 1.0})
    try:
        second.reset()
        assert second.env_scenes != scenes  # the other costs place other scenes on each worker
        second.load_state_dict(state)
        assert second.env_scenes == scenes
        older = {"workers": [{k: v for k, v in w.items() if k != "placed_by"} for w in state["workers"]]}
        third = env_with({"gen_000": 3.0, "gen_001": 1.0})
        try:
            third.reset()
            with pytest.raises(EnvError, match="env state refused .*other episodes per env"):
                third.load_state_dict(older)
            third.reset()
            assert third.step(np.ones(2, np.int64)).reward.shape == (2,)
        finally:
            third.close()
    finally:
        second.close()
