"""This process's RNG states (torch, numpy, python, and the CUDA device's), and their saved-state owner."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch


def rng_state(device: torch.device | None = None) -> dict[str, Any]:
    """This process's torch, numpy (legacy global) and python RNG states; on a CUDA `device` also that
    device's RNG state (action sampling runs there) and, for the record, its index."""
    np_state = np.random.get_state()
    state = {
        "torch": torch.get_rng_state(),
        "numpy": [np_state[0], np_state[1], *np_state[2:]],
        "python": random.getstate(),
    }
    if device is not None and device.type == "cuda":
        index = _cuda_index(device)
        state["cuda"] = torch.cuda.get_rng_state(torch.device("cuda", index))
        state["cuda_device"] = index
    return state


def set_rng_state(state: dict[str, Any], device: torch.device | None = None) -> None:
    """Restore `rng_state`'s states. The CUDA one goes onto whichever CUDA device this rank uses now (a
    requeue may give the rank another device index; the generator's state does not depend on the device);
    without CUDA it has nowhere to go. States may arrive on the device (map_location): RNG states are CPU
    byte tensors."""
    torch.set_rng_state(state["torch"].cpu())
    np.random.set_state(tuple(state["numpy"]))
    random.setstate(state["python"])
    if "cuda" in state and device is not None and device.type == "cuda":
        torch.cuda.set_rng_state(state["cuda"].cpu(), torch.device("cuda", _cuda_index(device)))


class RngState:
    """The saved-state owner of this process's RNGs (namespace "rng")."""

    def __init__(self, device: torch.device | None = None):
        self.device = device

    def state_dict(self) -> dict[str, Any]:
        return rng_state(self.device)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        set_rng_state(state, self.device)


def _cuda_index(device: torch.device) -> int:
    return device.index if device.index is not None else torch.cuda.current_device()
