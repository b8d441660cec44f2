"""Saved state comes in symmetric pairs: what `state_dict` gives, `load_state_dict` takes back unchanged; and
adding a piece of saved state is registering one owner with the checkpoint manager (train/builder.py), nothing
else; production saves through the manager these tests check."""

import numpy as np
import pytest
import torch

from ddppo import checkpoint as ckpt
from ddppo.rollout.scenes import SCENE_COLUMNS
from testutil import save_checkpoint, trainer_in_process


def same(a, b) -> bool:
    """Deep equality of nested containers of tensors / numpy arrays / scalars."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, np.ndarray):
        return np.array_equal(a, b)
    return a == b


@pytest.mark.parametrize("advantage", ["gae", "grpo"])
def test_saved_state_and_its_load_are_exact_inverses(tmp_path, tiny_config, advantage):
    extra = {"ppo.group_size": 4} if advantage == "grpo" else {}
    cfg = tiny_config(tmp_path, **{"log.tensorboard": "false", "ppo.advantage": advantage, **extra})
    with trainer_in_process(cfg) as trainer:
        trainer.phases.collect(1, trainer.learning.storage)  # somewhere mid-episode, with a carry of its own
        state = trainer.checkpoints.state_dict()
        assert set(state) == {"model", "optimizer", "counters", "rank"}
        assert set(state["rank"]) == {"rng", "collector", "advantage"}
        state["counters"] = {"update": 7, "env_steps": 896, "skipped_in_a_row": 1, "kl_beta": 0.0,
                             "window": [[np.ones(7), np.full(7, 2.0), 128, 0.5]],
                             "episode_metrics": list(trainer.metric_names), "metrics_record": '{"update": 7}',
                             "scene_window": {"names": list(trainer.scene_names),
                                              "tables": [np.ones((len(trainer.scene_names), len(SCENE_COLUMNS)))]}}
        if advantage == "grpo":
            state["rank"]["advantage"] = torch.ones(2, 4)
        trainer.checkpoints.load_state_dict(state)
        assert same(trainer.checkpoints.state_dict(), state)


def test_a_saved_window_keeps_each_metric_in_its_named_column(tmp_path, tiny_config):
    """The window's columns are named in the checkpoint: a resume with other metric names (another env's declared
    ones) moves each saved value to its name's column and drops the names this run lacks; a checkpoint without
    names (older) holds EPISODE_KEYS' columns."""
    cfg = tiny_config(tmp_path, **{"log.tensorboard": "false"})
    with trainer_in_process(cfg) as trainer:
        state = trainer.checkpoints.state_dict()
        names = trainer.metric_names
        state["counters"] = {"update": 3, "env_steps": 96, "skipped_in_a_row": 0, "kl_beta": 0.0,
                             "window": [[np.array([5.0, 7.0, 1.0]), np.array([1.0, 2.0, 1.0]), 32, 0.1]],
                             "episode_metrics": ["success", "not_here", "return"]}
        trainer.checkpoints.load_state_dict(state)
        (sums, counts, _, _), = trainer.progress.window
        assert sums[names.index("success")] == 5.0 and sums[names.index("return")] == 1.0
        assert counts[names.index("success")] == 1.0 and counts.sum() == 2.0 and len(sums) == len(names)
        del state["counters"]["episode_metrics"]
        state["counters"]["window"] = [[np.arange(7.0), np.ones(7), 32, 0.1]]
        trainer.checkpoints.load_state_dict(state)
        assert trainer.progress.window[0][0][names.index("spl")] == 3.0


def test_older_checkpoints_get_their_counter_defaults(tmp_path):
    """A checkpoint whose counters predate skipped_in_a_row, window, kl_beta and episode_metrics (saved through
    the manager, as `ddppo train` saved them then) reads back with COUNTER_DEFAULTS for those."""
    path = save_checkpoint(tmp_path, 1, {"w": torch.zeros(1)}, counters={"update": 1, "env_steps": 2}, rng=0)
    data = ckpt.load(path)
    assert data["world_size"] == 1 and set(data) == {"format", "model", "optimizer", "counters", "config_yaml",
                                                     "world_size", "rank_states"}
    assert ckpt.counters_of(data) == {"update": 1, "env_steps": 2, **ckpt.COUNTER_DEFAULTS}


def test_format1_rank_records_are_read_as_namespaces():
    """Format 1's per-rank layout (the collector's keys at the top, "grpo_carry", "ref_hidden", "rng") is read
    back as format 2's namespaces; a record without the collector's keys (rollout.overlap_learning) has none."""
    rng, obs, carry, ref = {"torch": torch.zeros(2)}, {"x": torch.ones(1)}, torch.ones(2, 4), torch.zeros(1, 4, 8)
    record = {"rng": rng, "obs": obs, "start": torch.ones(4), "env": {"n": 3}, "grpo_carry": carry, "ref_hidden": ref}
    assert same(ckpt.format1_namespaces(record), {"rng": rng, "advantage": carry, "reference": ref,
                                                  "collector": {"obs": obs, "start": torch.ones(4), "env": {"n": 3}}})
    assert same(ckpt.format1_namespaces({"rng": rng, "grpo_carry": carry}), {"rng": rng, "advantage": carry})


def test_production_saves_through_state_dict(tmp_path, tiny_config):
    """What the manager's `save` writes is its `state_dict()`, namespace for namespace: the file's shared keys and this rank's
    entry of rank_states, nothing renamed or spread (format 1 spread the collector's keys over the record)."""
    cfg = tiny_config(tmp_path, **{"log.tensorboard": "false", "ppo.advantage": "grpo", "ppo.group_size": 4})
    with trainer_in_process(cfg) as trainer:
        trainer.phases.collect(1, trainer.learning.storage)
        trainer.progress.update = 1
        trainer.checkpoints.save(1)
        state = trainer.checkpoints.state_dict()
    data = ckpt.load(tmp_path / "checkpoints" / "ckpt-1.pt")
    assert data["format"] == 2 and data["world_size"] == 1
    written = {**{k: data[k] for k in ("model", "optimizer", "counters")}, "rank": data["rank_states"][0]}
    assert same(written, state)


class TinyOwner:
    """A new piece of saved state: a counter this rank keeps."""

    def __init__(self):
        self.count = 0

    def state_dict(self):
        return {"count": self.count}

    def load_state_dict(self, state):
        self.count = state["count"]


def test_adding_saved_state_is_registering_one_owner(tmp_path, tiny_config, monkeypatch):
    """The one change: the owner registered where the builder gives the checkpoint manager its owners. The
    checkpoint carries it, resume restores it, with ddppo/checkpoint/ untouched."""
    from ddppo.train.builder import Trainer

    build_manager = Trainer._checkpoint_manager
    owners = []

    def with_tiny(self, *args, **kwargs):
        manager = build_manager(self, *args, **kwargs)
        owners.append(TinyOwner())
        manager.register("tiny", owners[-1])
        return manager

    monkeypatch.setattr(Trainer, "_checkpoint_manager", with_tiny)
    cfg = tiny_config(tmp_path, **{"log.tensorboard": "false"})
    with trainer_in_process(cfg) as trainer:
        owners[-1].count = 41
        trainer.progress.update = 1
        trainer.checkpoints.save(1)
    saved = ckpt.load(tmp_path / "checkpoints" / "ckpt-1.pt")["rank_states"][0]
    assert saved["tiny"] == {"count": 41}
    with trainer_in_process(cfg) as resumed:
        assert resumed.progress.update == 1 and owners[-1].count == 41
