"""Property-based fuzzing of the CLI surface (hypothesis): random dotlist overrides, YAML documents, sweep specs
and checkpoint bytes. Every case either runs or exits 2 with ONE line naming what is wrong (the key or the
file), never a traceback, never a partly written run or sweep dir.

The bulk goes through the in-process entry points the CLI itself calls (`ddppo.cli.main(argv)` for `config`
and `sweep --dry-run`, `checkpoint.load` for checkpoints, which is what `train`/`eval` call), which is faithful:
the same parsing and the same error reporting, minus interpreter start-up; a handful of real subprocesses
check the same through `python -m ddppo`. Example counts are bounded and derandomized (CI is reproducible);
each test prints how many cases it tried."""

from __future__ import annotations

import contextlib
import io
import re
import signal
import tempfile
from pathlib import Path

import pytest
import yaml

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from rel_util import REPO, describe, run_cli_many  # noqa: E402

GRIDNAV = REPO / "configs" / "gridnav.yaml"
FUZZ = settings(max_examples=80, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
DOTTED = re.compile(r"[A-Za-z_][\w]*\.[\w.]+|'[^']+'|\"[^\"]+\"")


@pytest.fixture(scope="module")
def cli_main():
    """ddppo.cli.main, with this process's signal handlers as they were (importing the CLI installs its own)."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)}
    from ddppo.cli import main

    for sig, handler in saved.items():
        signal.signal(sig, handler)
    return main


def run_main(main, argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:  # argparse
            rc = exc.code
    return rc, out.getvalue(), err.getvalue()


def assert_clean_refusal(rc: int, stdout: str, stderr: str, *names: str) -> None:
    """rc 0, or rc 2 with exactly one line on stderr naming a dotted key, a quoted name or one of `names`."""
    assert rc in (0, 2), (rc, stderr)
    if rc == 2:
        lines = stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("ddppo: "), stderr
        assert DOTTED.search(lines[0]) or any(n in lines[0] for n in names), lines[0]
        assert "Traceback" not in stderr


def config_keys() -> list[str]:
    from ddppo.config import fields_of

    return [k for k, _ in fields_of()]


KEYS = config_keys()
SCALARS = st.one_of(st.integers(-10**12, 10**12), st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
                    st.none(), st.text(max_size=12))
TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r\x00"), max_size=16)
KEY = st.one_of(st.sampled_from(KEYS), st.sampled_from(KEYS).map(lambda k: k + ".x"),
                st.sampled_from(["ppo", "env", "run", "dist", "x.y", "ppo..lr", ".lr", "env.gridnav"]), TEXT)
VALUE = st.one_of(st.integers(-10**6, 10**6).map(str), st.floats().map(repr), TEXT,
                  st.sampled_from(["true", "null", "[1,2]", "{a: 1}", "${ppo.lr}", "${oc.env:HOME}", "${x", "'",
                                   "1e999", "-0", "nan", "[", "gym:CartPole-v1", "~", "!!python/object:os.system"]))
ITEM = st.one_of(st.tuples(KEY, VALUE).map(lambda kv: f"{kv[0]}={kv[1]}"), TEXT).filter(
    lambda s: not s.startswith("-"))  # a leading '-' is an option to argparse (its own usage error)

counts: dict[str, list[int]] = {}


def tally(surface: str, refused: bool) -> None:
    counts.setdefault(surface, [0, 0])[int(refused)] += 1


def report(surface: str) -> None:
    ran, refused = counts.get(surface, [0, 0])
    print(f"\nfuzz {surface}: {ran + refused} cases ({ran} ran, {refused} refused with one line)")


def test_fuzz_dotlist_overrides(cli_main):
    @FUZZ
    @given(st.lists(ITEM, min_size=1, max_size=4))
    def case(items):
        rc, out, err = run_main(cli_main, ["config", str(GRIDNAV), *items])
        tally("overrides", rc != 0)
        assert_clean_refusal(rc, out, err, "override", *[i.split("=")[0] for i in items])

    case()
    report("overrides")


YAML_VALUE = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                           st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                          max_leaves=6)
SECTION = st.dictionaries(st.one_of(st.sampled_from(sorted({k.split(".")[1] for k in KEYS})), st.text(max_size=6)),
                          YAML_VALUE, max_size=4)
DOCUMENT = st.dictionaries(st.one_of(st.sampled_from(sorted({k.split(".")[0] for k in KEYS})), st.text(max_size=6)),
                           st.one_of(SECTION, YAML_VALUE), max_size=4)
JUNK = st.sampled_from([":", "- ", "\t", "&a ", "*a", "!!python/object:os.system ", "{", "[", "'", '"', "\n  x: 1\n",
                        "\nppo:\n  lr: 1\n", "%YAML 1.2\n", "---\n", "\x00", "\ufeff", "? "])


def test_fuzz_yaml_documents(cli_main):
    @FUZZ
    @given(DOCUMENT, st.lists(st.tuples(st.integers(0, 10**4), JUNK), max_size=3), st.booleans())
    def case(doc, mutations, dump_as_flow):
        text = yaml.safe_dump(doc, default_flow_style=dump_as_flow, allow_unicode=True)
        for pos, junk in mutations:
            pos %= len(text) + 1
            text = text[:pos] + junk + text[pos:]
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "fuzz.yaml"
            path.write_text(text, encoding="utf-8", errors="surrogatepass")
            rc, out, err = run_main(cli_main, ["config", str(path)])
        tally("yaml", rc != 0)
        assert_clean_refusal(rc, out, err, str(path))

    case()
    report("yaml")


SPEC = st.fixed_dictionaries({}, optional={
    "name": st.one_of(st.text(max_size=8), SCALARS),
    "base": st.one_of(st.just(str(GRIDNAV)), st.just("missing.yaml"), SCALARS),
    "overrides": st.one_of(st.dictionaries(st.sampled_from(KEYS), SCALARS, max_size=3), YAML_VALUE),
    "grid": st.one_of(st.dictionaries(st.sampled_from(KEYS + ["x.y"]), st.lists(SCALARS, max_size=2), max_size=2),
                      YAML_VALUE),
    "list": st.one_of(st.lists(st.dictionaries(st.sampled_from(KEYS + ["name"]), SCALARS, max_size=2), max_size=2),
                      YAML_VALUE),
    "seeds": st.one_of(st.integers(-2, 4), st.lists(st.integers(-5, 5), max_size=3), SCALARS),
    "ranks": st.one_of(st.integers(-1, 4), SCALARS),
    "max_parallel": st.one_of(st.integers(-1, 4), SCALARS),
    "slurm": st.one_of(st.lists(st.text(max_size=10), max_size=2), SCALARS),
    "junk": SCALARS,
})


def test_fuzz_sweep_specs(cli_main):
    @settings(FUZZ, max_examples=60)
    @given(SPEC)
    def case(spec):
        with tempfile.TemporaryDirectory() as d:
            path, sweep_dir = Path(d) / "spec.yaml", Path(d) / "sweep"
            path.write_text(yaml.safe_dump(spec, allow_unicode=True), encoding="utf-8", errors="surrogatepass")
            rc, out, err = run_main(cli_main, ["sweep", str(path), "--dry-run", "--sweep-dir", str(sweep_dir)])
            tally("sweep", rc != 0)
            assert_clean_refusal(rc, out, err, str(path), "sweep", "run")
            assert rc == 0 or not sweep_dir.exists(), "a refused sweep wrote its dir"

    case()
    report("sweep")


@pytest.fixture(scope="module")
def good_checkpoint(tmp_path_factory) -> bytes:
    import torch

    from ddppo import checkpoint as ckpt

    from testutil import save_checkpoint

    run = tmp_path_factory.mktemp("ckpt")
    model = torch.nn.GRU(3, 4).state_dict()
    return save_checkpoint(run, 3, model, counters={"update": 3, "env_steps": 96}, rng=ckpt.rng_state()).read_bytes()


def test_fuzz_checkpoint_bytes(good_checkpoint):
    from ddppo import checkpoint as ckpt
    from ddppo.errors import CheckpointError

    @settings(FUZZ, max_examples=120)
    @given(st.one_of(
        st.binary(max_size=2048),
        st.integers(0, len(good_checkpoint)).map(lambda n: good_checkpoint[:n]),
        st.lists(st.tuples(st.integers(0, len(good_checkpoint) - 1), st.integers(0, 255)), min_size=1,
                 max_size=8).map(lambda flips: _flip(good_checkpoint, flips))))
    def case(data):
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "ckpt-1.pt"
            path.write_bytes(data)
            try:
                ckpt.load(path)
            except CheckpointError as err:
                msg = str(err)
                assert "\n" not in msg and str(path) in msg, msg
                tally("checkpoint", True)
            else:
                tally("checkpoint", False)

    case()
    report("checkpoint")


def _flip(data: bytes, flips: list[tuple[int, int]]) -> bytes:
    out = bytearray(data)
    for pos, value in flips:
        out[pos] = value
    return bytes(out)


def test_fuzz_cases_through_real_processes(tmp_path: Path, good_checkpoint):
    """A handful of the same surfaces through `python -m ddppo`: exit 2, one line, nothing written."""
    (tmp_path / "truncated.pt").write_bytes(good_checkpoint[: len(good_checkpoint) // 2])
    (tmp_path / "dup.yaml").write_text("ppo:\n  lr: 1\nppo:\n  epochs: 2\n")
    (tmp_path / "spec.yaml").write_text(f"base: {GRIDNAV}\ngrid: {{ppo.lr: [1, -1]}}\n")
    cases = [
        (["train", str(GRIDNAV), f"run.dir={tmp_path / 'r1'}", f"checkpoint.path={tmp_path / 'truncated.pt'}"], "r1"),
        (["train", str(tmp_path / "dup.yaml"), f"run.dir={tmp_path / 'r2'}"], "r2"),
        (["train", str(GRIDNAV), f"run.dir={tmp_path / 'r3'}", "ppo.lr=${oc.env:HOME}"], "r3"),
        (["sweep", str(tmp_path / "spec.yaml"), "--sweep-dir", str(tmp_path / "r4")], "r4"),
    ]
    for (argv, written), res in zip(cases, run_cli_many([c[0] for c in cases])):
        lines = res.stderr.strip().splitlines()
        assert res.returncode == 2 and "Traceback" not in res.stderr, describe(res)
        assert len([ln for ln in lines if ln.startswith("ddppo: ")]) == 1, describe(res)
        assert not (tmp_path / written).exists(), f"{argv} wrote {written}"
