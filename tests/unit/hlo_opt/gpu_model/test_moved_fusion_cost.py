"""Priority fusion's incremental costs (`hlo_opt.gpu_model.moved_fusion_cost`) and moving fusion
steps (`fusion_utils.MoveRecord`): with moving forced on every step that allows it, each fusion's
seeded figures equal a whole walk of the fusion, and every decision (the priority-fusion dump:
fusion names, producers, consumers, microseconds saved) equals the run that never moves."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from hlo_opt import cli
from hlo_opt.fusion import fusion_utils
from hlo_opt.gpu_model import cost_analysis
from hlo_opt.gpu_model.cost_analysis import GpuHloCostAnalysis

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT / "bench"))
from adversarial_shapes import elementwise_chain  # noqa: E402

# modules before optimization (the `*.xla_gpu.hlo` beside some are XLA's output, fused already)
MODULES = sorted(p for p in [*ROOT.glob("testdata/*.hlo"), *ROOT.glob("testdata/fusion/*.hlo"),
                             *ROOT.glob("testdata/models/*.hlo"), *ROOT.glob("testdata/bench/*.hlo")]
                 if not p.name.endswith(".xla_gpu.hlo"))

# ops that are not elementwise between elementwise ones: the walk's utilizations are not all 1
MIXED_CHAIN = """HloModule mixed

ENTRY e {
  p0 = f32[64,128] parameter(0)
  p1 = f32[128] parameter(1)
  a = f32[64,128] exponential(p0)
  b = f32[64,128] broadcast(p1), dimensions={1}
  c = f32[64,128] add(a, b)
  t = f32[128,64] transpose(c), dimensions={1,0}
  s = f32[128,32] slice(t), slice={[0:128], [0:32]}
  pz = f32[] constant(0)
  pd = f32[128,64] pad(s, pz), padding=0_0x16_16
  m = f32[128,64] multiply(pd, pd)
  n = f32[128,64] negate(m)
  r = f32[128,64] reverse(n), dimensions={0}
  q = f32[128,64] add(r, t)
  cc = f32[128,128] concatenate(q, t), dimensions={1}
  sl = f32[128,64] slice(cc), slice={[0:128], [32:96]}
  e = f32[128,64] tanh(sl)
  ROOT out = f32[128,64] add(e, q)
}
"""


def _checked(compared: list):
    """GpuHloCostAnalysis.seed that also walks the fusion whole and compares the two figures at
    once (the seeded figures are updated in place by the next step that grows the fusion)."""
    original = GpuHloCostAnalysis.seed

    def seed(self, fusion, cost):
        seeded = original(self, fusion, cost)
        if seeded:
            _assert_same_cost(self._cache[fusion], self._fusion_cost(fusion), fusion.name)
            compared.append(fusion.name)
        return seeded
    return seed


def _run(path: Path, tmp: Path, move_min: int, monkeypatch, capsys) -> tuple[str, str]:
    monkeypatch.setattr(fusion_utils, "MOVE_MIN_INSTRUCTIONS", move_min)
    dump = tmp / f"d{move_min}"
    try:
        cli.main([str(path), "--dump-to", str(dump), "--dump-pass-re", "priority-fusion",
                  "-o", str(tmp / f"out{move_min}.hlo")])
        code = 0
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    assert code == 0, err
    (log,) = dump.glob("*.priority_fusion_dump.txt")
    return log.read_text(), (tmp / f"out{move_min}.hlo").read_text()


def _assert_same_cost(seeded, walked, name: str) -> None:
    assert math.isclose(seeded.flops, walked.flops, rel_tol=1e-12, abs_tol=1e-9), name
    assert seeded.output_bytes == walked.output_bytes, name
    assert seeded.operand_bytes == walked.operand_bytes, name
    assert seeded.bytes_accessed == walked.bytes_accessed, name
    assert seeded.operand_util == pytest.approx(walked.operand_util, rel=1e-12), name
    assert math.isclose(seeded.ir_size, walked.ir_size, rel_tol=1e-12), name
    for instr, util in walked.fused.util.items():
        assert seeded.fused.util[instr] == pytest.approx(util, rel=1e-12), (name, instr.name)
        assert seeded.fused.ir[instr] == pytest.approx(walked.fused.ir[instr], rel=1e-12), (name, instr.name)


def _case_ids():
    return [p.relative_to(ROOT).as_posix() for p in MODULES] + ["chain_300", "mixed_chain"]


@pytest.mark.parametrize("case", _case_ids())
def test_moving_changes_no_decision_and_seeds_exact_costs(case, tmp_path, monkeypatch, capsys):
    if case == "chain_300":
        path = tmp_path / "chain.hlo"
        path.write_text(elementwise_chain(300))
    elif case == "mixed_chain":
        path = tmp_path / "mixed.hlo"
        path.write_text(MIXED_CHAIN)
    else:
        path = ROOT / case
    never_log, never_out = _run(path, tmp_path, 10**9, monkeypatch, capsys)
    compared: list = []
    monkeypatch.setattr(GpuHloCostAnalysis, "seed", _checked(compared))
    always_log, always_out = _run(path, tmp_path, 1, monkeypatch, capsys)
    assert always_log == never_log
    assert always_out.count("fusion(") == never_out.count("fusion(")
    if case.startswith("chain"):
        assert compared, "the chain's steps were all seeded"


def test_a_chain_is_not_walked_whole_once_large(tmp_path, monkeypatch, capsys):
    """The adversarial chain: nearly every step grows a fusion by one op. Once a fusion is larger
    than MOVE_MIN_INSTRUCTIONS, its steps move and seed; no step walks a large fusion whole
    (without moving and seeding, every step re-clones and re-walks it: n^2/2 visits)."""
    path = tmp_path / "chain.hlo"
    path.write_text(elementwise_chain(400))
    compared: list = []
    monkeypatch.setattr(GpuHloCostAnalysis, "seed", _checked(compared))
    walked_sizes = []
    original_walk = cost_analysis.GpuHloCostAnalysis._fusion_cost

    def walk(self, fusion):
        walked_sizes.append(fusion.fused_computation().instruction_count())
        return original_walk(self, fusion)
    monkeypatch.setattr(cost_analysis.GpuHloCostAnalysis, "_fusion_cost", walk)
    _run(path, tmp_path, fusion_utils.MOVE_MIN_INSTRUCTIONS, monkeypatch, capsys)
    assert len(compared) > 150
    # the check in _checked walks each seeded fusion once; no other walk is of a large fusion
    large = [n for n in walked_sizes if n > 2 * fusion_utils.MOVE_MIN_INSTRUCTIONS]
    assert len(large) <= len(compared)
    assert max(walked_sizes) > 400  # the chain did become one large fusion
