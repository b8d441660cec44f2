"""`ddppo config`'s closing sizes comment says the precision the run uses: float32 weights always, and under
run.precision=bf16 not a float32 heading above a bf16 KV cache."""

from __future__ import annotations

from ddppo.config import load_config
from ddppo.config.sizes import size_lines


def test_the_sizes_heading_names_the_precision_of_the_run():
    fp32 = size_lines(load_config("gridnav", ["policy.rnn_type=transformer"]))
    assert fp32.startswith("# sizes (float32;") and "x 4 bytes" in fp32
    bf16 = size_lines(load_config("gridnav", ["policy.rnn_type=transformer", "run.precision=bf16"]))
    heading = bf16.splitlines()[0]
    assert not heading.startswith("# sizes (float32;") and "run.precision=bf16" in heading, heading
    assert "2 bytes (bf16: run.precision)" in bf16
