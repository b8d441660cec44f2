"""The last-resort bound's bookkeeping in one process (its firing is tests/distributed/test_exit_deadline.py,
with real rank processes): nothing is armed outside a rank's run, `disable` forgets every deadline, and the exit
code is the CLI's for the error."""

from __future__ import annotations

from ddppo.distributed import PeerLostError, deadline
from ddppo.envs.base import EnvError
from ddppo.errors import CheckpointError, ConfigError, LaunchError


def test_nothing_is_armed_outside_a_run_and_disable_forgets_everything():
    assert deadline.arm(0.0, 1, "would end this process") is None  # not enabled: a library user's process
    deadline.enable()
    try:
        token = deadline.arm(3600.0, 1, "a native call")
        assert token is not None and token in deadline._armed
        deadline.arm_exit(0, 3600.0, 1, "an error")
        assert deadline._state["exit"] in deadline._armed
        deadline.disarm(token)
        assert token not in deadline._armed
    finally:
        deadline.disable()
    assert deadline._armed == {} and deadline._state["exit"] is None
    assert deadline.arm(0.0, 1, "would end this process") is None


def test_the_exit_code_is_the_clis():
    assert {deadline.exit_code(cls("x")) for cls in (ConfigError, CheckpointError, LaunchError, EnvError)} == {2}
    assert deadline.exit_code(PeerLostError("x")) == deadline.exit_code(RuntimeError("x")) == 1
    assert deadline.exit_code(KeyboardInterrupt()) == 130 and deadline.exit_code(SystemExit(3)) == 3
