"""`policy.encoder_weights`: a local weights file for the library image encoders (model/pretrained.py).

Read once, when a run starts from nothing: a state dict (.pt/.pth, loaded with weights_only=True), a
.safetensors file, or a checkpoint that holds one under "model" or "state_dict" (VC-1's, timm's, open_clip's
layouts). Its keys are matched to the backbone's: a common prefix ("module.", "visual.", "backbone.", ...) is
stripped, keys under parts the encoder does not have (a classifier head, an MAE decoder, a mask token, a CLIP
text tower) are dropped; a key the encoder lacks inside a part it has, a missing key or a shape that differs
means a file of another architecture, named in one line.

The checkpoints hold the weights (they are part of the policy's state dict), so a resumed run and `ddppo eval`
never need the file; `EncoderWeightsRecord`, a saved-state owner of the checkpoint, keeps the file's sha256, and a
resumed run refuses a file that changed since.
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ddppo.errors import ConfigError
from ddppo.files import file_sha256

log = logging.getLogger(__name__)

KEY = "policy.encoder_weights"
NAMED = 3  # keys named per kind of mismatch


def read_state_dict(path: str | Path) -> dict[str, torch.Tensor]:
    """The tensors of a weights file, by key (a checkpoint's "model" / "state_dict" entry unwrapped)."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{KEY}={path}: no such file; pass the weights file (a state dict .pt/.pth or a "
                          f".safetensors), or leave {KEY} empty")
    if p.suffix == ".safetensors":
        try:
            from safetensors.torch import load_file
        except ImportError:
            raise ConfigError(f"{KEY}={path}: reading .safetensors needs the safetensors package: "
                              f'pip install -e ".[vision]"') from None
        try:
            return dict(load_file(str(p), device="cpu"))
        except Exception as err:  # noqa: BLE001 (its own error, in one line)
            raise ConfigError(f"{KEY}={path}: not a readable safetensors file ({type(err).__name__}: {err})") from None
    try:
        data = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        raise ConfigError(f"{KEY}={path}: torch.load(weights_only=True) cannot read it ({type(err).__name__}: "
                          f"{first}); save a state dict: torch.save(model.state_dict(), FILE)") from None
    for key in ("state_dict", "model", "model_state_dict"):
        if isinstance(data, dict) and isinstance(data.get(key), dict):
            data = data[key]
            break
    tensors = {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, torch.Tensor)} \
        if isinstance(data, dict) else {}
    if not tensors:
        raise ConfigError(f"{KEY}={path}: holds no tensors by name (a state dict, or one under 'model' or "
                          f"'state_dict'); save one with torch.save(model.state_dict(), FILE)")
    return tensors


def _prefix(keys: list[str], ours: set[str]) -> str:
    """The prefix to remove from `keys` to find `ours` ("" when they match as they are): the one under which most
    of ours are found, then the one most keys match through (a whole CLIP's text tower has `transformer.*` keys
    like its image tower's, which are found under "visual." only)."""
    votes: Counter = Counter()
    for key in keys:
        parts = key.split(".")
        for i in range(len(parts)):
            if ".".join(parts[i:]) in ours:
                votes[".".join(parts[:i]) + "." if i else ""] += 1
                break
    present = set(keys)
    return max(votes, key=lambda p: (sum(p + k in present for k in ours), votes[p]), default="")


def match(state: dict[str, torch.Tensor], module: nn.Module, path: str, what: str) -> dict[str, torch.Tensor]:
    """`state`'s entries for `module`, keyed as its state dict; ConfigError naming a few missing or unexpected
    keys and differing shapes when the file is of another architecture."""
    own = module.state_dict()
    prefix = _prefix(list(state), set(own))
    kept = {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
    parts = {k.split(".")[0] for k in own}
    unexpected = [k for k in kept if k not in own and k.split(".")[0] in parts]
    missing = [k for k in own if k not in kept]
    shapes = [f"{k} (file {tuple(kept[k].shape)}, {what} {tuple(own[k].shape)})" for k in own
              if k in kept and kept[k].shape != own[k].shape]
    if missing or unexpected or shapes:
        said = []
        for label, items in (("missing", missing), ("unexpected", unexpected), ("of another shape", shapes)):
            if items:
                more = f", ... ({len(items)} in all)" if len(items) > NAMED else ""
                said.append(f"{label}: {', '.join(items[:NAMED])}{more}")
        raise ConfigError(f"{KEY}={path} does not fit {what} ({'; '.join(said)}): pass weights saved from {what}")
    dropped = len(state) - len([k for k in kept if k in own])
    if dropped:
        log.info("%s: %d of its %d tensors are not %s's (a head, a decoder, another tower): left out", path,
                 dropped, len(state), what)
    return {k: kept[k] for k in own}


def load_encoder_weights(policy: nn.Module, path: str) -> str:
    """Put the file's weights into every library backbone of `policy`; its sha256."""
    from ddppo.model.pretrained import backbones

    found = backbones(policy)
    if not found:
        raise ConfigError(f"{KEY}={path}: the policy has no library image encoder to load it into (no image "
                          f"observation, or policy.image_encoder is not LIBRARY:NAME)")
    state = read_state_dict(path)
    for backbone in found:
        what = f"{backbone.library}:{backbone.name}"
        with torch.no_grad():
            backbone.model.load_state_dict(match(state, backbone.model, path, what))
    digest = file_sha256(path)
    log.info("encoder weights loaded from %s (sha256 %s) into %d encoder(s)", path, digest[:12], len(found))
    return digest


class EncoderWeightsRecord:
    """The checkpoint's record of the encoder weights file ("encoder_weights": {"file", "sha256"}), and the
    trainer's start: the file's weights go into the policy when the run starts from nothing; on resume the
    checkpoint holds them, and a file given and changed since is refused.

    `start(ctx)` (before the checkpoint manager resumes): rank 0 reads the file, where it is given and exists, into
    its policy (the parameters are then broadcast) and every rank learns its sha256, or the same error.
    `load_state_dict` (on resume) compares. `finish(model_loaded)` (after): a run that resumed nothing and has
    no file is refused."""

    def __init__(self, policy: nn.Module, path: str):
        self.policy, self.path = policy, path
        self.sha256: str | None = None
        self.missing = False

    def start(self, ctx: Any) -> None:
        if not self.path:
            return

        def read() -> tuple[str | None, bool]:
            if not Path(self.path).is_file():
                return None, True
            return load_encoder_weights(self.policy, self.path), False

        self.sha256, self.missing = ctx.decide_on_main(read if ctx.is_main else None, (ConfigError,))

    def finish(self, model_loaded: bool) -> None:
        if self.missing and not model_loaded:
            read_state_dict(self.path)  # raises: no such file
        if self.missing:
            log.info("%s=%s is not there: the checkpoint holds the encoder weights", KEY, self.path)

    def state_dict(self) -> dict[str, Any]:
        return {"file": self.path, "sha256": self.sha256}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        started = state.get("sha256")
        if self.path and not self.missing and self.sha256 != started:
            was = f"sha256 {started[:12]}... ({state.get('file')})" if started else "no weights file"
            raise ConfigError(f"{KEY}={self.path} is not the file this run started with (sha256 {self.sha256[:12]}... "
                              f"now, {was} then): the checkpoint holds the weights it trained; restore the "
                              f"file, or move it away (the run resumes from the checkpoint alone), or start a new "
                              f"run.dir")
        self.sha256 = started  # kept in the next checkpoints, also when the file is gone
