"""torch's environment variables read as torch reads them, so ddppo never decides differently from torch.

torch's c10d reads its NCCL variables with two parsers (torch/csrc/distributed/c10d/Utils.hpp, torch 2.4-2.13):

- `getCvarBool(names, default)`: every name of the list that is set is read, the later (legacy) names first,
  so the first name wins; its value, lower-cased and not stripped, must be one of y/yes/1/t/true (on) or
  n/no/0/f/false (off). Anything else, the empty value and " 1" included, makes creating the process group
  raise "Invalid value for environment variable" - even in a legacy name the first name overrides.
- `getCvarInt(names, default)`: the same order, each value through C++'s `std::stoi`: leading white space, an
  optional sign, then digits (what follows them is ignored); no digit, or beyond a 32-bit int, raises.

`check_nccl_env` checks every variable ProcessGroupNCCL reads that ddppo reads or sets too, before the
rendezvous, so a value torch would refuse minutes later (once the group is made) is one ConfigError line (exit 2)
before anything waits on it. torchrun's TORCHELASTIC_USE_AGENT_STORE is compared with "True" exactly, as
torch.distributed.rendezvous does.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping, Sequence

from ddppo.errors import ConfigError

BOOL_ON = ("y", "yes", "1", "t", "true")
BOOL_OFF = ("n", "no", "0", "f", "false")
# the lists ProcessGroupNCCL.hpp passes to getCvarBool / getCvarInt (first name wins)
BLOCKING_WAIT = ("TORCH_NCCL_BLOCKING_WAIT", "NCCL_BLOCKING_WAIT")
ASYNC_ERROR_HANDLING = ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING")
DUMP_ON_TIMEOUT = ("TORCH_NCCL_DUMP_ON_TIMEOUT",)
NCCL_BOOLS = (BLOCKING_WAIT, DUMP_ON_TIMEOUT)
NCCL_INTS = (ASYNC_ERROR_HANDLING,)

_STOI = re.compile(r"[ \t\n\v\f\r]*([+-]?[0-9]+)")
_INT32 = (-2 ** 31, 2 ** 31 - 1)


def _refuse(name: str, value: str, accepted: str) -> ConfigError:
    return ConfigError(f"{name}={value!r} in the environment is not a value torch accepts ({accepted}; torch would "
                       f"refuse it when the NCCL process group is created): set it to one of them, or unset it")


def parse_bool(name: str, value: str) -> bool:
    """One value as getCvarBool reads it; ConfigError naming `name` where torch raises."""
    low = value.lower()
    if low in BOOL_ON:
        return True
    if low in BOOL_OFF:
        return False
    raise _refuse(name, value, "on: " + "/".join(BOOL_ON) + ", off: " + "/".join(BOOL_OFF) + ", any case, no spaces")


def parse_int(name: str, value: str) -> int:
    """One value as getCvarInt reads it (std::stoi); ConfigError naming `name` where torch raises."""
    match = _STOI.match(value)
    number = int(match.group(1)) if match else None
    if number is None or not _INT32[0] <= number <= _INT32[1]:
        raise _refuse(name, value, "a whole number, optionally after white space and a sign")
    return number


def _cvar(environ: Mapping[str, str], names: Sequence[str], default: Any, parse: Callable[[str, str], Any]) -> Any:
    """torch's getCvar*: the first of `names` that is set wins, `default` when none is; every set name is parsed
    (checked), as torch reads them all."""
    result = default
    for name in reversed(names):
        if name in environ:
            result = parse(name, environ[name])
    return result


def cvar_bool(environ: Mapping[str, str], names: Sequence[str], default: bool) -> bool:
    """getCvarBool: the value torch takes for `names`, `default` when none is set; every set name is checked."""
    return _cvar(environ, names, default, parse_bool)


def cvar_int(environ: Mapping[str, str], names: Sequence[str], default: int) -> int:
    """getCvarInt: as cvar_bool, for a whole number."""
    return _cvar(environ, names, default, parse_int)


def check_nccl_env(environ: Mapping[str, str]) -> None:
    """ConfigError (one line naming the variable) for any NCCL variable torch would refuse."""
    for names in NCCL_BOOLS:
        cvar_bool(environ, names, False)
    for names in NCCL_INTS:
        cvar_int(environ, names, 0)

