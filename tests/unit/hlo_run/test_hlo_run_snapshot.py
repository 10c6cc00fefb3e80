"""hlo-run --save-snapshot (hlo_run.snapshot_io): a run written as an HloSnapshot reads back with
the module, the arguments it really ran on and its result; running the snapshot again
(`--input_format=snapshot`) reproduces the run and compares with the recorded result; and a
snapshot's arguments are the ones --find-first-mismatch bisects with."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from click.testing import CliRunner

from hlo_common.hlo.parser import parse_module
from hlo_common.proto.messages import HloSnapshot
from hlo_common.source import read_input
from hlo_run.cli import cli
from hlo_run.inputs import make_fake_arguments

ROOT = Path(__file__).resolve().parents[3]
SOFTMAX = ROOT / "testdata" / "softmax.hlo"
MIXED = """HloModule mixed
ENTRY e {
  a = bf16[2,3]{0,1} parameter(0)
  t = (s32[4], pred[4]) parameter(1)
  i = s32[4] get-tuple-element(t), index=0
  p = pred[4] get-tuple-element(t), index=1
  c = bf16[3,2] transpose(a), dimensions={1,0}
  s = s32[4] select(p, i, i)
  ROOT r = (bf16[3,2], s32[4]) tuple(c, s)
}
"""


def _run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return res.exit_code, res.output


def _npz(path: Path) -> list[np.ndarray]:
    with np.load(path) as data:
        return [data[k] for k in sorted(data.files, key=lambda k: int(k[3:]))]


def test_saved_snapshot_holds_the_run_and_replays_it(tmp_path) -> None:
    snap, out1, out2 = tmp_path / "s.pb", tmp_path / "first.npz", tmp_path / "again.npz"
    rc, log = _run("--platform", "interpreter", "--seed", "7", "--save-snapshot", str(snap),
                   "--output", str(out1), str(SOFTMAX))
    assert rc == 0, log
    loaded = read_input(snap).snapshot
    assert loaded is not None and loaded.module.name == parse_module(SOFTMAX.read_text(), "s").name
    expected_args = make_fake_arguments(parse_module(SOFTMAX.read_text(), "s"), 7)
    assert len(loaded.arguments) == len(expected_args)
    for got, want in zip(loaded.arguments, expected_args):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(loaded.result, _npz(out1)[0])
    rc, log = _run("--platform", "interpreter", "--input_format=snapshot", "--output", str(out2), str(snap))
    assert rc == 0, log
    assert "snapshot's recorded result are close enough" in log
    np.testing.assert_array_equal(_npz(out2)[0], _npz(out1)[0])


def test_replayed_snapshot_compares_with_its_recorded_result(tmp_path) -> None:
    snap = tmp_path / "s.pb"
    assert _run("--platform", "interpreter", "--save-snapshot", str(snap), str(SOFTMAX))[0] == 0
    msg = HloSnapshot.FromString(snap.read_bytes())
    msg.result.f32s[0] += 1.0  # a recorded result the module does not give
    snap.write_bytes(msg.SerializeToString())
    rc, log = _run("--platform", "interpreter", str(snap))
    assert rc == 1 and "differs from the snapshot's recorded result" in log


def test_snapshot_of_tuples_and_narrow_types_round_trips(tmp_path) -> None:
    src, snap = tmp_path / "mixed.hlo", tmp_path / "mixed.pb"
    src.write_text(MIXED)
    rc, log = _run("--platform", "interpreter", "--seed", "2", "--save-snapshot", str(snap), str(src))
    assert rc == 0, log
    loaded = read_input(snap).snapshot
    want = make_fake_arguments(parse_module(MIXED, "m"), 2)
    assert loaded.arguments[0].dtype.name == "bfloat16"
    np.testing.assert_array_equal(loaded.arguments[0], want[0])
    assert isinstance(loaded.arguments[1], tuple)
    for got, exp in zip(loaded.arguments[1], want[1]):
        np.testing.assert_array_equal(got, exp)
    np.testing.assert_array_equal(loaded.result[0], np.asarray(want[0]).T)
    assert _run("--platform", "interpreter", str(snap))[0] == 0


def test_find_first_mismatch_bisects_with_the_snapshot_s_arguments(tmp_path, monkeypatch) -> None:
    import hlo_run.bisect

    snap = tmp_path / "s.pb"
    assert _run("--platform", "interpreter", "--seed", "11", "--save-snapshot", str(snap), str(SOFTMAX))[0] == 0
    recorded = read_input(snap).snapshot.arguments
    seen = []
    monkeypatch.setattr(hlo_run.bisect, "find_first_mismatch", lambda program, options, args: seen.append(args) or True)
    rc, log = _run("--platform", "host", "--find-first-mismatch", str(snap))
    assert rc == 0, log
    assert len(seen) == 1 and len(seen[0]) == len(recorded)
    for got, want in zip(seen[0], recorded):
        np.testing.assert_array_equal(got, want)
    assert not np.array_equal(recorded[0], make_fake_arguments(read_input(snap).snapshot.module, 0)[0])
