"""Env worker output reaches the parent whole lines at a time, named, including a dying worker's last words."""

import multiprocessing as mp
import os
import tempfile

from ddppo.envs.runtime.worker_output import OutputRelay, redirect_output_to


def _chatty(conn, tag: bytes, die: bool) -> None:
    redirect_output_to(conn)
    for i in range(300):  # each line in three writes, on both fds, as C++ loggers do
        os.write(1, tag + b"-start-")
        os.write(2, b"%d-" % i)
        os.write(1, b"end\n")
    if die:
        os.write(2, b"last words without a newline")
        os._exit(3)


def test_lines_of_several_workers_are_never_mixed():
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryFile() as sink:
        relay = OutputRelay(out_fd=sink.fileno())
        procs = []
        for w, die in ((0, False), (1, True)):
            r, wr = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_chatty, args=(wr, b"w%d" % w, die))
            proc.start()
            wr.close()
            relay.add(r, f"worker-{w}")
            procs.append(proc)
        for proc in procs:
            proc.join(60)
        relay.join(10)
        sink.seek(0)
        lines = sink.read().decode().splitlines()
    assert [p.exitcode for p in procs] == [0, 3]
    for w in (0, 1):
        mine = [line for line in lines if line.startswith(f"worker-{w}: ")]
        body = [line[len(f"worker-{w}: "):] for line in mine]
        assert body[:300] == [f"w{w}-start-{i}-end" for i in range(300)]
    assert lines.count("worker-1: last words without a newline") == 1
    assert len(lines) == 601
