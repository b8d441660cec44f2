"""Checkpoints (ddppo/checkpoint.py): atomic save, keep-last, weights_only round trip, broken files;
and the run dir as the unit of resume (ddppo/train/startup.py)."""

import dataclasses
import logging
import os
import pickle
import random

import numpy as np
import pytest
import torch
import yaml

from ddppo.rundir import checkpoint_update
from ddppo import checkpoint as ckpt
from ddppo.errors import CheckpointError
from ddppo.envs.gridnav.env import GridNav
from ddppo.envs.gridnav.options import GridNavOptions
from ddppo.envs.base import EnvSpec


def payload(seed=0, **extra):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.GRU(4, 4))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model(torch.randn(2, 3))[0].sum().backward()
    opt.step()
    return {"model": model.state_dict(), "optimizer": opt.state_dict(),
            "counters": {"update": 3, "env_steps": 384, "skipped_in_a_row": 0},
            "config_yaml": "run:\n  seed: 1\n", "world_size": 1, "rank_states": [], **extra}


def names(run_dir):
    return [p.name for p in ckpt.list_checkpoints(run_dir)]


def assert_same(a, b):
    """Deep equality of nested containers of tensors / numpy arrays / scalars, types included."""
    if isinstance(a, dict) and isinstance(b, dict):  # OrderedDict state dicts come back as dicts
        a, b = dict(a), dict(b)
    assert type(a) is type(b), (type(a), type(b))
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and torch.equal(a, b)
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            assert_same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_same(x, y)
    else:
        assert a == b


def test_round_trip_weights_only_with_numpy_env_state(tmp_path):
    env = GridNav(GridNavOptions(map_size=7, num_maps=2), EnvSpec(num_envs=3, seed=5))
    env.reset()
    for _ in range(4):
        env.step(np.array([1, 2, 3]))
    env_state = env.state_dict()
    rank_state = {
        "rng": ckpt.rng_state(),
        "env": env_state,
        "arrays": {"f32": np.random.rand(2, 3).astype(np.float32), "i64": np.arange(5), "b": np.array([True, False]),
                   "u8": np.arange(6, dtype=np.uint8).reshape(2, 3), "empty": np.zeros((0, 2))},
        "scalars": [np.float64(1.5), np.int64(7)],
        "hidden": torch.randn(1, 3, 4),
    }
    p = payload(rank_states=[rank_state])
    path = ckpt.save(tmp_path, 3, p, keep_last=2)
    assert path.name == "ckpt-3.pt"
    torch.load(path, weights_only=True)  # loadable without unpickling arbitrary objects
    data = ckpt.load(path)
    assert data["format"] == ckpt.FORMAT
    for key in ("model", "optimizer", "counters", "config_yaml", "world_size"):
        assert_same(data[key], p[key])
    loaded = data["rank_states"][0]
    assert_same(loaded["arrays"], rank_state["arrays"])
    assert loaded["scalars"] == [1.5, 7]
    assert_same(loaded["hidden"], rank_state["hidden"])
    # the env continues from the stored state exactly like the original
    twin = GridNav(GridNavOptions(map_size=7, num_maps=2), EnvSpec(num_envs=3, seed=5))
    twin.reset()
    twin.load_state_dict(loaded["env"])
    for _ in range(20):
        a = np.random.randint(0, 4, size=3)
        r1, r2 = env.step(a), twin.step(a)
        assert np.array_equal(r1.reward, r2.reward) and np.array_equal(r1.obs["pointgoal"], r2.obs["pointgoal"])


def test_rng_state_round_trip(tmp_path):
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    state = ckpt.rng_state()
    expected = (random.random(), np.random.rand(), torch.rand(1))
    ckpt.save(tmp_path, 1, payload(rank_states=[{"rng": state}]), keep_last=1)
    random.seed(9), np.random.seed(9), torch.manual_seed(9)
    ckpt.set_rng_state(ckpt.load(tmp_path / "checkpoints" / "ckpt-1.pt")["rank_states"][0]["rng"])
    assert (random.random(), np.random.rand()) == expected[:2]
    assert torch.equal(torch.rand(1), expected[2])


def test_keep_last_prunes_oldest_numerically(tmp_path):
    for update in (8, 9, 10, 11, 100):
        ckpt.save(tmp_path, update, payload(), keep_last=3)
    assert names(tmp_path) == ["ckpt-10.pt", "ckpt-11.pt", "ckpt-100.pt"]  # not a string sort
    ckpt.save(tmp_path, 101, payload(), keep_last=1)
    assert names(tmp_path) == ["ckpt-101.pt"]


def test_save_is_atomic_when_writing_fails(tmp_path, monkeypatch):
    ckpt.save(tmp_path, 1, payload(), keep_last=3)
    before = (tmp_path / "checkpoints" / "ckpt-1.pt").read_bytes()
    real_save = torch.save

    def half_then_fail(obj, f, *a, **k):
        real_save(obj, f, *a, **k)
        f.truncate(100)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch, "save", half_then_fail)
    with pytest.raises(OSError):
        ckpt.save(tmp_path, 2, payload(), keep_last=1)
    monkeypatch.undo()
    # no partial ckpt-2, no temp file left, and the previous checkpoint untouched (not pruned)
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["ckpt-1.pt"]
    assert (tmp_path / "checkpoints" / "ckpt-1.pt").read_bytes() == before


def test_save_writes_through_a_temp_file_and_rename(tmp_path, monkeypatch):
    seen = []
    real_replace = os.replace

    def spy(src, dst):
        seen.append((str(src), str(dst), (tmp_path / "checkpoints" / "ckpt-4.pt").exists()))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    ckpt.save(tmp_path, 4, payload(), keep_last=2)
    ((src, dst, existed),) = seen
    assert dst.endswith("ckpt-4.pt") and src != dst and not existed  # the final name appears only by rename
    assert checkpoint_update(src) is None  # a temp file is never taken for a checkpoint


def test_non_finite_model_or_optimizer_refused(tmp_path):
    ckpt.save(tmp_path, 1, payload(), keep_last=3)
    bad = payload()
    next(iter(bad["model"].values()))[0] = float("nan")
    with pytest.raises(CheckpointError, match="non-finite.*model"):
        ckpt.save(tmp_path, 2, bad, keep_last=1)
    bad = payload()
    bad["optimizer"]["state"][0]["exp_avg"].fill_(float("inf"))
    with pytest.raises(CheckpointError, match="non-finite.*optimizer"):
        ckpt.save(tmp_path, 3, bad, keep_last=1)
    assert names(tmp_path) == ["ckpt-1.pt"]


def write_corrupt(run_dir, update, how):
    path = ckpt.checkpoint_dir(run_dir) / f"ckpt-{update}.pt"
    path.parent.mkdir(parents=True, exist_ok=True)
    if how == "truncated":
        ckpt.save(run_dir, update, payload(), keep_last=100)
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "garbage":
        path.write_bytes(b"\x00not a zip file" * 50)
    return path


@pytest.mark.parametrize("how", ["truncated", "empty", "garbage"])
def test_newest_valid_skips_corrupt_newest_with_warning(tmp_path, caplog, how):
    ckpt.save(tmp_path, 5, payload(seed=1), keep_last=3)
    bad = write_corrupt(tmp_path, 6, how)
    with caplog.at_level(logging.WARNING, logger="ddppo.checkpoint"):
        path, data = ckpt.newest_valid(tmp_path)
    assert path.name == "ckpt-5.pt"
    assert_same(data["model"], payload(seed=1)["model"])
    assert any("skipping" in r.getMessage() and bad.name in r.getMessage() for r in caplog.records)


def test_none_valid_raises_and_no_checkpoints_is_none(tmp_path):
    assert ckpt.newest_valid(tmp_path) is None
    write_corrupt(tmp_path, 1, "garbage")
    write_corrupt(tmp_path, 2, "truncated")
    with pytest.raises(CheckpointError, match="none of the 2 checkpoints"):
        ckpt.newest_valid(tmp_path)


def test_load_refuses_files_that_are_not_checkpoints(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        ckpt.load(tmp_path / "missing.pt")
    plain = tmp_path / "state.pt"
    torch.save({"weights": torch.zeros(2)}, plain)  # a torch file, but not ours
    with pytest.raises(CheckpointError, match="not a ddppo checkpoint"):
        ckpt.load(plain)
    text = tmp_path / "notes.pt"
    text.write_text("hello")
    with pytest.raises(CheckpointError, match="not a readable ddppo checkpoint"):
        ckpt.load(text)
    evil = tmp_path / "evil.pt"
    torch.save({"format": ckpt.FORMAT, "model": {}, "obj": Exploit()}, evil)  # needs full unpickling
    with pytest.raises(CheckpointError, match="not a readable ddppo checkpoint"):
        ckpt.load(evil)
    assert not Exploit.ran


class Exploit:
    ran = False

    def __reduce__(self):
        return (_mark_ran, ())


def _mark_ran():
    Exploit.ran = True


def test_to_from_bytes_between_ranks():
    state = {"a": np.arange(3, dtype=np.int32), "b": [torch.ones(2), (1, "x")]}
    back = ckpt.from_storable(ckpt.from_bytes(ckpt.to_bytes(ckpt.to_storable(state))))
    assert_same(back, state)
    with pytest.raises(pickle.UnpicklingError):  # from_bytes is weights_only too
        ckpt.from_bytes(pickle.dumps(Exploit(), protocol=2))


def test_new_checkpoint_outranks_abandoned_later_ones(tmp_path, caplog):
    """Resume skipped a corrupt ckpt-6 and went on from ckpt-4: the next save (update 5) must
    survive keep-last pruning and be what the next resume picks; the old files are kept aside."""
    ckpt.save(tmp_path, 4, payload(), keep_last=1)
    write_corrupt(tmp_path, 6, "garbage")
    with caplog.at_level(logging.WARNING, logger="ddppo.checkpoint"):
        ckpt.save(tmp_path, 5, payload(seed=2), keep_last=1)
    assert names(tmp_path) == ["ckpt-5.pt"]
    path, data = ckpt.newest_valid(tmp_path)
    assert path.name == "ckpt-5.pt"
    assert_same(data["model"], payload(seed=2)["model"])
    assert (tmp_path / "checkpoints" / "ckpt-6.pt.stale").exists()  # set aside, not deleted
    assert any("ckpt-6.pt" in r.getMessage() for r in caplog.records)
    # a valid later checkpoint of an abandoned run (checkpoint.resume=false) is set aside too
    ckpt.save(tmp_path, 9, payload(), keep_last=3)
    ckpt.save(tmp_path, 2, payload(seed=3), keep_last=3)
    assert ckpt.newest_valid(tmp_path)[0].name == "ckpt-2.pt"


# ------------------------------------------------------------------------ run dir (resume.py)
class MainRank:
    is_main = True


def start_run_dir(cfg) -> None:
    """What the builder does with the run dir at start-up: check the stored config, then (rank 0) write it."""
    from ddppo.train.startup import check_run_dir, write_run_dir

    write_run_dir(cfg, MainRank(), check_run_dir(cfg))


def test_run_dir_start_up_keeps_every_previous_config(tmp_path, tiny_config):
    run = tmp_path / "run"
    base = tiny_config(run)
    cfgs = [dataclasses.replace(base, ppo=dataclasses.replace(base.ppo, lr=lr)) for lr in (1e-3, 2e-3, 3e-3)]
    for cfg in cfgs:  # three changes within the same second must not overwrite each other
        start_run_dir(cfg)
    assert yaml.safe_load((run / "config.yaml").read_text())["ppo"]["lr"] == 3e-3
    kept = sorted(run.glob("config.*.yaml"))
    assert len(kept) == 2
    assert sorted(yaml.safe_load(p.read_text())["ppo"]["lr"] for p in kept) == [1e-3, 2e-3]


def test_run_dir_start_up_refuses_shape_change_only_after_training(tmp_path, tiny_config):
    from ddppo.errors import ConfigError
    run = tmp_path / "run"
    start_run_dir(tiny_config(run))
    # no checkpoint yet (a start that failed before the first one): a new shape is fine
    start_run_dir(tiny_config(run, **{"policy.hidden_size": 48}))
    ckpt.save(run, 1, payload(), keep_last=1)
    before = (run / "config.yaml").read_text()
    with pytest.raises(ConfigError, match=r"policy\.hidden_size: 48 -> 64"):
        start_run_dir(tiny_config(run, **{"policy.hidden_size": 64}))
    assert (run / "config.yaml").read_text() == before


class FakeCuda:
    """Stands in for torch.cuda's per-device RNG state functions (there is no GPU here)."""

    def __init__(self):
        self.states = {0: torch.arange(16, dtype=torch.uint8), 1: torch.arange(16, 32, dtype=torch.uint8)}
        self.set_calls = []

    def get_rng_state(self, device="cuda"):
        return self.states[torch.device(device).index].clone()

    def set_rng_state(self, state, device="cuda"):
        assert state.dtype == torch.uint8 and state.device.type == "cpu"
        self.set_calls.append((torch.device(device).index, state.clone()))


def test_cuda_rng_state_restored_onto_the_device_the_rank_uses_now(tmp_path, monkeypatch):
    """On CUDA a rank's device RNG state (action sampling noise) goes into its checkpoint state and comes
    back on resume onto whichever CUDA device the rank uses now (a requeue with another ranks-per-node
    layout moves it: the state does not depend on the device); the checkpoint stays weights_only."""
    fake = FakeCuda()
    monkeypatch.setattr(torch.cuda, "get_rng_state", fake.get_rng_state)
    monkeypatch.setattr(torch.cuda, "set_rng_state", fake.set_rng_state)
    assert "cuda" not in ckpt.rng_state(torch.device("cpu"))
    state = ckpt.rng_state(torch.device("cuda", 1))
    assert torch.equal(state["cuda"], fake.states[1]) and state["cuda_device"] == 1
    ckpt.save(tmp_path, 1, payload(rank_states=[state]), keep_last=2)
    with open(ckpt.checkpoint_dir(tmp_path) / "ckpt-1.pt", "rb") as f:
        torch.load(f, weights_only=True)  # plain tensors and ints only
    loaded = ckpt.load(ckpt.checkpoint_dir(tmp_path) / "ckpt-1.pt")["rank_states"][0]

    ckpt.set_rng_state(loaded, torch.device("cpu"))  # resumed without CUDA: nothing to restore it into
    assert fake.set_calls == []
    ckpt.set_rng_state(loaded, torch.device("cuda", 0))  # requeued onto cuda:0
    ckpt.set_rng_state(loaded, torch.device("cuda", 1))  # or onto the same device again
    assert [i for i, _ in fake.set_calls] == [0, 1]
    assert all(torch.equal(restored, fake.states[1]) for _, restored in fake.set_calls)
    ckpt.set_rng_state(ckpt.rng_state(torch.device("cpu")), torch.device("cuda", 1))  # saved on CPU: no-op
    assert len(fake.set_calls) == 2
    ckpt.RngState(torch.device("cuda", 0)).load_state_dict(loaded)  # the trainer's "rng" owner does the same
    assert fake.set_calls[-1][0] == 0 and len(fake.set_calls) == 3
