"""`ddppo bench memory-cores` runs, tiny, and reports each core's times and memory per env."""

import json

from ddppo.benchmarks.speed import memory_cores


def test_memory_cores_reports_every_core(tmp_path, capsys):
    out = tmp_path / "cores.json"
    assert memory_cores.main(["--envs", "4", "--steps", "3", "--hidden", "8", "--heads", "2", "--contexts", "3",
                              "--epochs", "1", "--minibatches", "2", "--rounds", "1", "--out", str(out)]) == 0
    rows = {r["core"]: r for r in json.loads(out.read_text())["rows"]}
    assert set(rows) == {"gru", "transformer c=3"}
    assert rows["gru"]["memory_bytes_per_env"] == 8 * 4
    assert rows["transformer c=3"]["memory_bytes_per_env"] == 2 * 2 * 2 * 8 * 4 + 16  # layers x 2 x (c - 1) x hidden
    assert all(r["act_s"] > 0 and r["learn_s"] > 0 for r in rows.values())
    assert "transformer c=3" in capsys.readouterr().out
