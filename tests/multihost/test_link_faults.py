"""The link between two hosts is cut (the veth unplugged from the bridge: packets vanish, no reset) while
ranks collect a rollout, and while they all-reduce gradients. Every rank exits non-zero within dist.timeout_s
plus the bounded check-in, with one line naming the lost rank(s); the newest checkpoint loads; after the link
is back the job resumes from it and finishes.

Mid-rollout: each update is ~98 % env stepping (20 steps of 150 ms), the cut comes 0.3 s after an update's
metrics line (its last act): the rollout runs 2.7 s past the cut, so even a loaded machine cuts it mid-rollout.
Mid-all-reduce: a big policy (hidden 512, ~8 MB of gradients) over a link limited to 40 Mbit/s (tc tbf), the cut
comes while the gradients stream (over 100 KB through the link within 50 ms).
The time from the cut to each exit is printed (figures for the closing note; asserts only bound a hang)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from mh_util import by_hand, newest_params, wait_for_update

TIMEOUT_S = 5
PORT = 29500


def _argv(run: Path, total_updates: int, phase: str) -> list[str]:
    values = {"run.dir": str(run), "env.name": "synthetic", "env.num_envs": 4, "ppo.num_mini_batch": 1,
              "ppo.epochs": 1, "log.tensorboard": "false", "log.interval_s": 0.01, "run.torch_threads": 1,
              "checkpoint.interval_updates": 2, "dist.timeout_s": TIMEOUT_S,
              "run.total_env_steps": total_updates * 2 * 4 * (20 if phase == "rollout" else 4)}
    if phase == "rollout":
        values.update({"rollout.num_steps": 20, "env.synthetic.step_sleep_s": 0.15, "policy.hidden_size": 32})
    else:
        values.update({"rollout.num_steps": 4, "policy.hidden_size": 512, "preemption.enabled": "false"})
    return ["-m", "ddppo", "train", str(Path(__file__).resolve().parents[2] / "tests" / "distributed" /
                                         "empty.yaml"), *[f"{k}={v}" for k, v in values.items()]]


@pytest.mark.timeout(240)
@pytest.mark.parametrize("phase", ["rollout", "allreduce"])
def test_link_cut_every_rank_exits_naming_the_lost_rank_and_resume_works(network, tmp_path: Path, phase: str):
    net = network(2)
    if phase == "allreduce":
        net.limit_rate(1, kbit=40_000)
    run = tmp_path / "run"
    job = by_hand(net, [0, 1], _argv(run, 10_000, phase), PORT, tmp_path / "logs", extra={"LOCAL_WORLD_SIZE": "1"})
    wait_for_update(run, 3, 120, job)
    assert all(p.poll() is None for p in job.procs), job.describe()
    if phase == "rollout":  # an update's metrics line is its last act: the next rollout (~3 s) has begun
        wait_for_update(run, 4, 60, job, poll_s=0.02)
        time.sleep(0.3)
    else:
        _wait_for_burst(net, 1, 100_000, 0.05, 60)
    net.cut(1)
    codes = job.wait(TIMEOUT_S + 40)
    print(f"\nlink cut mid-{phase}: exit after {[round(t, 1) if t else t for t in job.exit_s]} s (dist.timeout_s="
          f"{TIMEOUT_S}); first lines: {[_error_line(job.output(i)) for i in range(2)]}")
    assert codes == [1, 1], job.describe()
    assert "peer rank(s) [1] lost" in _error_line(job.output(0)), job.describe()
    what = "end-of-rollout sync" if phase == "rollout" else "gradient all-reduce"
    assert what in _error_line(job.output(0)) + _error_line(job.output(1)), job.describe()
    assert "rendezvous store is unreachable" in _error_line(job.output(1)), job.describe()
    assert not any("Traceback" in job.output(i) for i in range(2)), job.describe()

    update, _ = newest_params(run)  # the newest checkpoint loads
    assert update >= 2
    net.reconnect(1)
    net.clear_impairment(1)
    job = by_hand(net, [0, 1], _argv(run, update + 2, phase), PORT + 1, tmp_path / "resume",
                  extra={"LOCAL_WORLD_SIZE": "1"})
    assert job.wait(120) == [0, 0], job.describe()
    assert f"at update {update}" in job.output(0), job.describe()
    assert newest_params(run)[0] == update + 2


def _wait_for_burst(net, host: int, min_bytes: int, window_s: float, timeout_s: float) -> None:
    """Return once `min_bytes` went through host `host`'s link within `window_s` (a transfer is streaming)."""
    deadline = time.monotonic() + timeout_s
    last = net.traffic_bytes(host)
    while time.monotonic() < deadline:
        time.sleep(window_s)
        now = net.traffic_bytes(host)
        if now - last >= min_bytes:
            return
        last = now
    raise AssertionError(f"no transfer of {min_bytes} bytes in {window_s} s through host {host}'s link")


def _error_line(text: str) -> str:
    lines = [ln for ln in text.splitlines() if " ERROR " in ln or ln.startswith("ddppo: ")]
    return lines[0][:300] if lines else ""
