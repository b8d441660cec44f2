"""Simulator lifetime: whatever order the envs close their simulators in, habitat-sim's are destroyed
last-created-first, also at interpreter exit (a stand-in models habitat-sim 0.2's abort)."""

import itertools
import os
import subprocess
import sys
import types

import pytest

from ddppo.envs.scenes.sim import _SimulatorOwner

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class AbortingSimulators:
    """habitat-sim 0.2.x as observed: once the first-created simulator is closed, closing another one
    still open aborts the process (here: is recorded as an abort)."""

    def __init__(self):
        self.live, self.closed, self.aborts = [], [], []
        self.first_closed = False
        owner = self

        class Simulator:
            def __init__(self, config):
                self.name = config
                owner.live.append(self)

            def close(self):
                if owner.first_closed:
                    owner.aborts.append(self.name)
                if self is owner.live[0] and len(owner.live) > 1:
                    owner.first_closed = True
                owner.live.remove(self)
                owner.closed.append(self.name)

        self.module = types.SimpleNamespace(Simulator=Simulator)


@pytest.mark.parametrize("order", list(itertools.permutations(range(3))))
def test_any_release_order_destroys_last_created_first(order):
    hs, owner = AbortingSimulators(), _SimulatorOwner()
    sims = [owner.create(hs.module, k) for k in range(3)]
    for k in order:
        owner.release(sims[k])
    assert hs.aborts == [] and hs.closed == [2, 1, 0] and owner.open_count() == 0


def test_released_simulator_waits_for_the_ones_created_after_it():
    hs, owner = AbortingSimulators(), _SimulatorOwner()
    a, b = owner.create(hs.module, "a"), owner.create(hs.module, "b")
    owner.release(a)
    assert hs.closed == [] and owner.open_count() == 2  # parked: b still renders
    c = owner.create(hs.module, "c")
    owner.release(c)
    assert hs.closed == ["c"]
    owner.release(b)
    assert hs.closed == ["c", "b", "a"] and hs.aborts == []


def test_failed_close_does_not_stop_the_others(caplog):
    hs, owner = AbortingSimulators(), _SimulatorOwner()
    a, b = owner.create(hs.module, "a"), owner.create(hs.module, "b")

    def broken():
        raise RuntimeError("driver gone")

    b.close = broken
    owner.release(b)
    owner.release(a)
    assert hs.closed == ["a"] and owner.open_count() == 0 and "driver gone" in caplog.text


def test_open_simulators_are_closed_in_order_at_interpreter_exit():
    script = """
import types
from ddppo.envs.scenes.sim import _SIMULATORS
closed = []
class Simulator:
    def __init__(self, config): self.name = config
    def close(self): print("closed", self.name, flush=True)
hs = types.SimpleNamespace(Simulator=Simulator)
sims = [_SIMULATORS.create(hs, k) for k in range(3)]
_SIMULATORS.release(sims[0])
print("exiting", flush=True)
"""
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=REPO))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:4] == ["exiting", "closed 2", "closed 1", "closed 0"]
