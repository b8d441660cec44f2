"""Checkpoints are data, never code: every load uses `torch.load(weights_only=True)`, so a checkpoint
holding a pickled object is refused without running it. The payload below would create a marker file
when unpickled; a control load with weights_only=False shows that it really does.

Also: configs are YAML read with a safe loader (a python tag is refused, not run), and the config a
checkpoint carries is YAML text, not a pickled object.
"""

from __future__ import annotations

import ast
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from rel_util import EMPTY_CONFIG, REPO, describe, run_cli, run_cli_many, snapshot, synthetic_overrides

PER_UPDATE = 4 * 8


class _Touch:
    """Unpickling this calls os.system("touch MARKER")."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def _evil_checkpoint(path: Path, marker: Path, template: dict | None = None) -> Path:
    """A file that looks like a ddppo checkpoint (format 1, model, ...) but holds a pickled object."""
    data = dict(template) if template else {"format": 1, "model": {}, "optimizer": {}, "counters": {}}
    data["counters"] = {**data.get("counters", {}), "payload": _Touch(marker)}
    torch.save(data, path)
    return path


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("security")
    res = run_cli("train", str(EMPTY_CONFIG), *synthetic_overrides(
        root / "run", **{"run.total_env_steps": 2 * PER_UPDATE, "checkpoint.interval_updates": 1}))
    assert res.returncode == 0, describe(res)
    return root / "run"


def test_the_payload_is_real_when_loaded_without_weights_only(tmp_path: Path):
    marker = tmp_path / "marker"
    path = _evil_checkpoint(tmp_path / "evil.pt", marker)
    torch.load(path, weights_only=False)  # the unsafe load the project must never do
    assert marker.exists()


@pytest.mark.timeout(300)
def test_pickled_object_checkpoints_are_refused_not_run(trained: Path, tmp_path: Path):
    from ddppo import checkpoint as ckpt

    marker = tmp_path / "marker"
    template = torch.load(trained / "checkpoints" / "ckpt-2.pt", weights_only=True)  # as stored: tensors only
    evil = _evil_checkpoint(tmp_path / "evil.pt", marker, {"format": 1, "model": template["model"]})
    numpy_pickled = tmp_path / "numpy.pt"  # not malicious, yet refused: the loader takes tensors and plain data only
    torch.save({**template, "counters": {**template["counters"], "window": np.zeros(3)}}, numpy_pickled)

    # 1. resume: a pickled-object newest checkpoint in the run dir is skipped; ckpt-2 is used
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    _evil_checkpoint(run / "checkpoints" / "ckpt-3.pt", marker, {**template, "format": 1})
    overrides = {"run.total_env_steps": 3 * PER_UPDATE, "checkpoint.interval_updates": 1}
    cases = [["train", str(EMPTY_CONFIG), *synthetic_overrides(run, **overrides)],
             # 2. checkpoint.path (fine-tuning) and 3. ppo.kl_ref.checkpoint (the reference policy)
             ["train", str(EMPTY_CONFIG), *synthetic_overrides(tmp_path / "fresh1", **overrides),
              f"checkpoint.path={evil}"],
             ["train", str(EMPTY_CONFIG), *synthetic_overrides(tmp_path / "fresh2", **overrides),
              f"ppo.kl_ref.checkpoint={evil}"],
             # 4. evaluation of a given checkpoint file
             ["eval", str(trained), "--checkpoint", str(evil), "--out", str(tmp_path / "eval")],
             ["train", str(EMPTY_CONFIG), *synthetic_overrides(tmp_path / "fresh3", **overrides),
              f"checkpoint.path={numpy_pickled}"]]
    before_trained = snapshot(trained)
    resumed, init, reference, evaluated, numpy_init = run_cli_many(cases)
    assert not marker.exists(), "a pickled object in a checkpoint was executed"

    assert resumed.returncode == 0, describe(resumed)
    assert "skipping checkpoint" in resumed.stderr and "ckpt-3.pt" in resumed.stderr, describe(resumed)
    assert "refused by the weights-only loader" in resumed.stderr and "posix.system" in resumed.stderr, \
        describe(resumed)
    assert "ckpt-2.pt at update 2" in resumed.stderr, describe(resumed)
    assert ckpt.load(run / "checkpoints" / "ckpt-3.pt")["counters"]["update"] == 3  # replaced by a real one
    for res in (resumed, init, reference, evaluated):  # never the advice to retry an untrusted file unsafely
        assert "weights_only` set to `False`" not in res.stderr, describe(res)
    for res in (init, reference):
        assert res.returncode == 2 and "Traceback" not in res.stderr, describe(res)
        assert "evil.pt" in res.stderr and "not a readable ddppo checkpoint" in res.stderr, describe(res)
        assert "refused by the weights-only loader" in res.stderr, describe(res)
    assert numpy_init.returncode == 2 and "refused by the weights-only loader: Unsupported global: GLOBAL numpy" \
        in numpy_init.stderr, describe(numpy_init)
    assert not any((tmp_path / f"fresh{i}").exists() for i in (1, 2, 3))
    assert evaluated.returncode != 0 and "Traceback" not in evaluated.stderr, describe(evaluated)
    assert "evil.pt" in evaluated.stderr, describe(evaluated)
    assert snapshot(trained) == before_trained


@pytest.mark.timeout(200)
def test_config_with_a_python_tag_is_refused_not_run(trained: Path, tmp_path: Path):
    from ddppo import checkpoint as ckpt

    marker = tmp_path / "marker"
    tag = f'!!python/object/apply:os.system ["touch {marker}"]'
    config = tmp_path / "evil.yaml"
    config.write_text(f"run:\n  seed: {tag}\n")
    # a run dir whose config.yaml carries the tag, and one whose checkpoint's stored config (YAML text) does
    tampered_dir, tampered_ckpt = tmp_path / "run-config", tmp_path / "run-ckpt"
    shutil.copytree(trained, tampered_dir)
    path = tampered_dir / "config.yaml"
    path.write_text(path.read_text().replace("seed: 0", f"seed: {tag}", 1))
    shutil.copytree(trained, tampered_ckpt)
    data = torch.load(tampered_ckpt / "checkpoints" / "ckpt-2.pt", weights_only=True)
    data["config_yaml"] = data["config_yaml"].replace("seed: 0", f"seed: {tag}", 1)
    assert tag in data["config_yaml"] and tag in path.read_text()
    for name in ("ckpt-1.pt", "ckpt-2.pt"):
        torch.save(data, tampered_ckpt / "checkpoints" / name)
    results = run_cli_many([["train", str(config), f"run.dir={tmp_path / 'fresh'}"]] + [
        ["train", str(EMPTY_CONFIG), *synthetic_overrides(run, **{"run.total_env_steps": 3 * PER_UPDATE})]
        for run in (tampered_dir, tampered_ckpt)])
    assert not marker.exists(), "a YAML python tag was executed"
    for res in results:
        assert res.returncode == 2 and "Traceback" not in res.stderr, describe(res)
        assert "python/object" in res.stderr, describe(res)
    assert not (tmp_path / "fresh").exists()
    assert ckpt.load(tampered_ckpt / "checkpoints" / "ckpt-2.pt")["config_yaml"] == data["config_yaml"]  # untouched


def _safe_yaml_loader(path: Path, call: ast.Call) -> bool:
    """`yaml.load(text, Loader)` where Loader, looked up in that module, is a yaml.SafeLoader subclass."""
    import importlib

    import yaml

    loader = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "Loader"), None)
    if not isinstance(loader, ast.Name):
        return False
    module = importlib.import_module(".".join(path.relative_to(REPO).with_suffix("").parts))
    cls = getattr(module, loader.id, None)
    return isinstance(cls, type) and issubclass(cls, yaml.SafeLoader)


def test_every_load_in_the_code_is_weights_only_and_yaml_is_safe():
    """Static: each torch.load call passes weights_only=True; no pickle/unsafe YAML loads anywhere."""
    offenders = []
    for path in sorted([*(REPO / "ddppo").rglob("*.py"), *(REPO / "envs").rglob("*.py")]):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = ast.unparse(node.func)
            where = f"{path.relative_to(REPO)}:{node.lineno} {name}"
            if name.endswith("torch.load"):
                kw = {k.arg: k.value for k in node.keywords}
                if not (isinstance(kw.get("weights_only"), ast.Constant) and kw["weights_only"].value is True):
                    offenders.append(where)
            if name == "yaml.load" and _safe_yaml_loader(path, node):
                continue
            if name == "_Unpickler" and path == REPO / "ddppo" / "interop" / "safe_unpickle.py":
                continue  # the restricted unpickler of habitat-baselines files: its find_class imports nothing
            if name in ("pickle.load", "pickle.loads", "cPickle.load", "yaml.load", "yaml.unsafe_load",
                        "yaml.full_load", "dill.load", "joblib.load") or name.endswith("Unpickler"):
                offenders.append(where)
    assert not offenders, offenders
    from ddppo.interop import safe_unpickle  # the one exception overrides find_class (tests/interop/test_safe_unpickle.py)

    assert "find_class" in vars(safe_unpickle._Unpickler) and "persistent_load" in vars(safe_unpickle._Unpickler)


@pytest.mark.timeout(200)
def test_single_node_store_listens_only_on_master_addr(tmp_path: Path):
    """The rendezvous store rank 0 hosts (plain `ddppo train` ranks, MASTER_ADDR=127.0.0.1) is not
    reachable through this host's other addresses."""
    import socket

    import psutil

    from rel_util import dist_harness

    overrides = synthetic_overrides(tmp_path / "run", **{"run.total_env_steps": 10**8,
                                                         "env.synthetic.step_sleep_s": 0.01})
    overrides = [o for o in overrides if not o.startswith("run.dir=")]
    with dist_harness.start_ranks(2, tmp_path / "run", overrides, tmp_path) as job:
        job.wait_for_updates(1, timeout_s=150)
        port = int(psutil.Process(job.procs[0].pid).environ()["MASTER_PORT"])
        listening = [c.laddr for c in psutil.Process(job.procs[0].pid).net_connections(kind="inet")
                     if c.status == psutil.CONN_LISTEN and c.laddr.port == port]
        others = [a.address for addrs in psutil.net_if_addrs().values() for a in addrs
                  if a.family == socket.AF_INET and not a.address.startswith("127.")]
        reachable = []
        for address in others:
            with socket.socket() as s:
                s.settimeout(2)
                if s.connect_ex((address, port)) == 0:
                    reachable.append(address)
        log = job.log_text()
    assert [a.ip for a in listening] == ["127.0.0.1"], f"store on port {port} listens on {listening}\n{log}"
    assert reachable == [], f"the store answers on {reachable}"
