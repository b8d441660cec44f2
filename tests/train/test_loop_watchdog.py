"""The training loop arms its watchdog around each update and disarms it whatever happens inside (an error in
the update must not leave a watchdog armed to kill the process later, e.g. while the error is reported)."""

from __future__ import annotations

import types

import pytest

from ddppo.config import load_config
from ddppo.timing import Timer
from ddppo.train.loop import TrainingLoop


class RecordingWatchdog:
    def __init__(self) -> None:
        self.events: list[str] = []

    def arm(self) -> None:
        self.events.append("arm")

    def disarm(self) -> None:
        self.events.append("disarm")


class FailingLearning:
    def step(self, update: int):
        raise RuntimeError(f"update {update} failed")


def test_an_update_that_raises_leaves_the_watchdog_disarmed(tmp_path):
    cfg = load_config(None, [f"run.dir={tmp_path}"])
    progress = types.SimpleNamespace(update=4, env_steps=0, skipped_in_a_row=0, kl_beta=None, scene_window=None)
    watchdog = RecordingWatchdog()
    loop = TrainingLoop(cfg, types.SimpleNamespace(world_size=1, is_main=True), FailingLearning(), progress,
                        checkpoints=None, writer=None, timer=Timer(), diagnose=lambda *a: None, num_parameters=1,
                        watchdog=watchdog)
    with pytest.raises(RuntimeError, match="update 5 failed"):
        loop.run()
    assert watchdog.events == ["arm", "disarm"]
