"""Read a torch.save zip file that may hold arbitrary pickled objects, without running any of its code.

`torch.load(weights_only=True)` refuses files that pickle classes (habitat-baselines' checkpoints pickle
their OmegaConf config), and `weights_only=False` runs whatever the file says. This reader sits between:
it opens the zip archive itself and unpickles `data.pkl` with an Unpickler whose `find_class` never
imports anything. Tensors are rebuilt from the archive's storages, plain containers (dict, OrderedDict,
list, tuple, set) come back as themselves, and every other global becomes an `Inert` stand-in: calling it
or building it only records the arguments and state as data. Globals of modules that run code (os,
subprocess, builtins' eval/exec, ...) are refused with UnsafePickleError naming them; even those would only
be recorded, never called.
"""

from __future__ import annotations

import _compat_pickle
import collections
import io
import pickle
import zipfile
from pathlib import Path
from typing import Any

import torch

# torch storage class names in the pickle -> dtype
_STORAGES = {f"{name}Storage": dtype for name, dtype in [
    ("Float", torch.float32), ("Double", torch.float64), ("Half", torch.float16), ("BFloat16", torch.bfloat16),
    ("Long", torch.int64), ("Int", torch.int32), ("Short", torch.int16), ("Char", torch.int8),
    ("Byte", torch.uint8), ("Bool", torch.bool), ("ComplexFloat", torch.complex64),
    ("ComplexDouble", torch.complex128)]}
_REFUSED_MODULES = ("os", "posix", "nt", "subprocess", "sys", "shutil", "importlib", "runpy", "pickle", "socket",
                    "ctypes", "code", "pty", "signal", "multiprocessing", "webbrowser", "builtins", "__builtin__",
                    "io", "pathlib", "tempfile", "marshal", "types", "operator", "functools", "torch.hub")
_SAFE_BUILTINS = {"set": set, "frozenset": frozenset, "slice": slice, "complex": complex, "bytearray": bytearray,
                  "list": list, "dict": dict, "tuple": tuple, "int": int, "float": float, "bool": bool, "str": str,
                  "object": object}


class UnsafePickleError(ValueError):
    """The file asks to call something that could run code; nothing of it was run."""


class Inert:
    """A stand-in for a pickled object of a class this reader does not import: its name, call arguments
    and state, as data. Each unknown global gets its own subclass (`inert_class`), so pickle's NEWOBJ,
    REDUCE, BUILD, SETITEMS and APPENDS all work on it without calling anything of the original."""

    qualname = "?"
    args: tuple = ()
    kwargs: dict = {}
    state: Any = None

    def __init__(self, *args: Any, **kwargs: Any):
        self.args, self.kwargs = args, kwargs

    def __setstate__(self, state: Any) -> None:
        self.state = state

    def _bag(self) -> dict:
        if not isinstance(self.state, dict):
            self.state = {} if self.state is None else {"__state__": self.state}
        return self.state

    def __setitem__(self, key: Any, value: Any) -> None:  # SETITEMS on a dict subclass
        self._bag().setdefault("__items__", {})[key] = value

    def append(self, value: Any) -> None:  # APPENDS on a list subclass
        self._bag().setdefault("__list__", []).append(value)

    def extend(self, values: Any) -> None:
        for v in values:
            self.append(v)

    def __repr__(self) -> str:
        return f"Inert({self.qualname})"


def inert_class(qualname: str) -> type:
    return type(qualname.rpartition(".")[2] or "Inert", (Inert,), {"qualname": qualname})


def _rebuild_tensor(storage: torch.Tensor, offset: int, size: tuple, stride: tuple, *rest: Any) -> torch.Tensor:
    return torch.as_strided(storage, size, stride, offset)


def _rebuild_parameter(data: torch.Tensor, requires_grad: bool, *rest: Any) -> torch.Tensor:
    return data


def _ordered_dict(*args: Any) -> collections.OrderedDict:
    return collections.OrderedDict(*args)


_ALLOWED = {
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("collections", "OrderedDict"): _ordered_dict,
}


class _Unpickler(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, archive: zipfile.ZipFile, prefix: str):
        super().__init__(file)
        self.archive, self.prefix = archive, prefix
        self.storages: dict[str, torch.Tensor] = {}

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _compat_pickle.NAME_MAPPING:  # protocol-2 files name Python 2 modules
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        if (module, name) in _ALLOWED:
            return _ALLOWED[(module, name)]
        if module == "torch" and name in _STORAGES:
            return ("storage-type", _STORAGES[name])
        if module == "torch" and name in ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16",
                                          "int8", "uint8", "bool"):
            return getattr(torch, name)
        if module in ("builtins", "__builtin__") and name in _SAFE_BUILTINS:
            return _SAFE_BUILTINS[name]
        if module.split(".")[0] in _REFUSED_MODULES or module in _REFUSED_MODULES or name in ("eval", "exec",
                                                                                               "system", "__import__"):
            raise UnsafePickleError(f"it asks to call {module}.{name}, which could run code; refused, nothing was "
                                    f"run")
        return inert_class(f"{module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        if not (isinstance(pid, tuple) and pid and pid[0] == "storage" and len(pid) >= 5):
            raise pickle.UnpicklingError(f"unknown persistent id {str(pid)[:80]}")
        kind, key, numel = pid[1], str(pid[2]), int(pid[4])
        dtype = kind[1] if isinstance(kind, tuple) else getattr(kind, "dtype", None)
        if not isinstance(dtype, torch.dtype):
            raise pickle.UnpicklingError(f"unknown storage type {kind!r}")
        if key not in self.storages:
            raw = self.archive.read(f"{self.prefix}data/{key}")
            flat = torch.frombuffer(bytearray(raw), dtype=dtype) if raw else torch.empty(0, dtype=dtype)
            self.storages[key] = flat[:numel] if flat.numel() >= numel else flat
        return self.storages[key]


def load(path: str | Path) -> Any:
    """The object a torch.save zip file holds, with unknown classes as `Inert` (see the module doc).

    Raises UnsafePickleError for calls that could run code, ValueError for anything that is not a
    torch.save zip archive (the message says which)."""
    try:
        return _load_archive(path)
    except ValueError:  # UnsafePickleError included
        raise
    except Exception as err:  # a damaged archive or pickle: bad CRC, truncated member, missing storage, ...
        raise ValueError(f"it could not be read safely ({type(err).__name__}: {str(err)[:160]})") from None


def _load_archive(path: str | Path) -> Any:
    try:
        archive = zipfile.ZipFile(path)
    except zipfile.BadZipFile:
        raise ValueError("not a torch.save zip archive (files from torch < 1.6 are not read)") from None
    with archive:
        pkl = [n for n in archive.namelist() if n.endswith("/data.pkl") or n == "data.pkl"]
        if not pkl:
            raise ValueError("a zip archive without data.pkl, not a torch.save file")
        prefix = pkl[0][: -len("data.pkl")]
        order = f"{prefix}byteorder"
        if order in archive.namelist() and archive.read(order).strip() not in (b"little", b""):
            raise ValueError("a big-endian checkpoint; not supported")
        return _Unpickler(io.BytesIO(archive.read(pkl[0])), archive, prefix).load()


def plain(obj: Any) -> Any:
    """Inert OmegaConf / dataclass / dict-subclass objects -> plain dicts, lists and values, recursively
    (a DictConfig's `_content`, a value node's `_val`, a dataclass's fields, a one-argument call's argument)."""
    if isinstance(obj, Inert):
        state = obj.state if isinstance(obj.state, dict) else {}
        if isinstance(obj.state, tuple):  # (dict_state, slot_state)
            state = {k: v for part in obj.state if isinstance(part, dict) for k, v in part.items()}
        if "_content" in state:
            return plain(state["_content"])
        if "_val" in state:
            return plain(state["_val"])
        if "__items__" in state or "__list__" in state:
            return plain(state.get("__items__", state.get("__list__")))
        if not state and len(obj.args) == 1:  # e.g. a Counter or defaultdict-like call with its content
            return plain(obj.args[0])
        return {k: plain(v) for k, v in state.items() if not str(k).startswith("_")}
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    return obj
