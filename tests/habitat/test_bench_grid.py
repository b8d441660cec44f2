"""`ddppo bench throughput` on the habitat env (grid double): the bare-simulator column is measured too."""

import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_bench_throughput_reports_the_bare_simulator(generated, tmp_path):
    out = tmp_path / "throughput.json"
    case = [os.path.join(REPO, "configs", "pointnav_habitat_cpu.yaml"), "env.habitat.backend=grid",
            f"env.habitat.dataset={generated['dataset']}", f"env.habitat.scenes_dir={generated['scenes_dir']}",
            "env.num_envs=2", "env.num_workers=1", "env.habitat.depth_width=16", "env.habitat.depth_height=16",
            "rollout.num_steps=4", "policy.hidden_size=16", "policy.image_encoder=cnn"]
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "ddppo", "bench", "throughput", "--rounds", "1", "--out", str(out),
                           "--case", *case], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "1 sim fps" in proc.stdout and "rollout/sim" in proc.stdout
    (result,) = json.loads(out.read_text())
    assert result["env"] == "habitat_pointnav" and result["num_workers"] == 1
    assert result["raw_sim_fps"] > 0 and result["rollout_fps"] > 0 and result["train_fps"] > 0
    assert result["rollout_over_sim"] == result["rollout_fps"] / result["raw_sim_fps"]
