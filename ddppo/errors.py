"""Errors a user can act on: the one home of their classes and of the table the CLI reports them by.

Each is one line naming what is wrong and the fix; `ddppo` prints it as `ddppo: <label>: <message>` and exits 2
(cli.py). The Python API raises the same classes. EnvError is the environments' own (envs/base.py: `envs` never
imports ddppo); it is listed here, among the kinds, and imported only when the table is asked for. Nothing heavy
is imported here, so the CLI and the launcher variables' reader (distributed/launch.py) can use these cheaply.
"""

from __future__ import annotations

EXIT_USER_ERROR = 2  # the exit code of every user error (the CLI's, and a rank's last-resort exit's)


class ConfigError(ValueError):
    """A config problem the user can fix; the message names key, value and fix."""


class DirectoryBusy(ConfigError):
    """Another live process writes the directory; the message names it and the fix (rundir/claim.py)."""


class SweepError(ConfigError):
    """A sweep spec or plan problem the user can fix; the message names the run and/or the key."""


class DatasetError(ConfigError):
    """A demonstration dataset that cannot be used (missing, truncated, altered, recorded on another env or layout):
    the message names the file or the keys and what to do (imitation/dataset.py)."""


class CheckpointError(RuntimeError):
    """A checkpoint is missing, unreadable or incompatible; the message says which and why."""


class RewardModelError(RuntimeError):
    """The reward model (reward.model) cannot be built, raised, or returned what is not one finite reward per env;
    the message names the module and what it returned."""


class LaunchError(ValueError):
    """A launcher variable that cannot describe this process (one line naming it, its value and the fix)."""


def user_error_kinds() -> tuple[tuple[type[Exception], str], ...]:
    """(class, label) of every kind of user error, in the order the CLI tries them; an error of none of these
    is a bug (its traceback is shown)."""
    from ddppo.envs.base import EnvError

    return ((ConfigError, "config error"), (EnvError, "environment error"), (CheckpointError, "checkpoint error"),
            (RewardModelError, "reward model error"), (LaunchError, "launcher error"))


def user_error_label(err: BaseException) -> str | None:
    """The label the CLI reports `err` under (`config error`, ...), or None when it is not a user error."""
    return next((label for cls, label in user_error_kinds() if isinstance(err, cls)), None)
