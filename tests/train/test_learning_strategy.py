"""One training loop: how collection and learning are arranged (serial, or overlapped under
rollout.overlap_learning) is a strategy chosen once by the builder, which the loop calls; the loop itself never
branches on the mode (ddppo/train/learning.py, ddppo/train/loop.py)."""

from __future__ import annotations

import ast
import inspect
import textwrap

import pytest

from ddppo.config import load_config
from ddppo.train.learning import SerialLearning
from ddppo.train.overlap_learning import OverlapLearning
from ddppo.train import loop

GRIDNAV = "configs/gridnav.yaml"
MODE_NAMES = ("overlap", "overlap_learning", "overlapped", "OverlapLearning", "SerialLearning")


def names_in(source: str) -> set[str]:
    """Every attribute and name a function's source mentions."""
    tree = ast.parse(textwrap.dedent(source))
    return ({n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
            | {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)})


def test_the_loop_mentions_no_mode_and_calls_the_strategy():
    found = names_in(inspect.getsource(loop))
    assert not found & set(MODE_NAMES), found & set(MODE_NAMES)
    assert {"learning", "step"} <= found


def test_the_check_can_fail():
    branching = '''
def train(self):
    while True:
        if self.overlap is None:
            collected = self._collect(update)
        else:
            collected = self._collect_while_learning(update)
'''
    assert names_in(branching) & set(MODE_NAMES) == {"overlap"}


@pytest.mark.parametrize("overlap, kind", [(False, SerialLearning), (True, OverlapLearning)])
def test_the_strategy_is_chosen_once_and_called_every_update(tmp_path, overlap, kind):
    from testutil import trainer_in_process

    cfg = load_config(GRIDNAV, [f"run.dir={tmp_path / 'run'}", "env.num_envs=4", "rollout.num_steps=16",
                                "ppo.num_mini_batch=2", "policy.hidden_size=32", "run.torch_threads=1",
                                "dist.device=cpu", "log.tensorboard=false", "run.total_env_steps=192",
                                f"rollout.overlap_learning={str(overlap).lower()}"])
    with trainer_in_process(cfg) as trainer:
        assert type(trainer.learning) is kind
        calls = []
        step = trainer.learning.step
        trainer.learning.step = lambda update: calls.append(update) or step(update)
        assert trainer.train() == 0
        assert calls == [1, 2, 3]
