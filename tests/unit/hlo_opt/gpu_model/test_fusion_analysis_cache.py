"""HloFusionAnalysisCache: one cache of fusion analyses for the cost model and the legality rules,
and an invalidation after which no stale analysis can be used: unit cases on an edited fusion,
then the whole GPU pipeline over the testdata modules with a cache that checks every hit against
a fresh analysis (and a cache that never forgets, which that check catches)."""

from __future__ import annotations

from pathlib import Path

import pytest

import hlo_opt.gpu_model as gpu_model
from hlo_common.gpu.device import H100
from hlo_common.hlo.parser import parse_module
from hlo_common.hlo_pass.pipeline import PipelineError, RunOptions
from hlo_opt.fusion.fusion_utils import FusionEditor
from hlo_opt.gpu_model.fusion_analysis_cache import HloFusionAnalysisCache
from hlo_opt.pipelines import build_gpu_pipeline

ROOT = Path(__file__).resolve().parents[4]
MODULES = sorted(ROOT.glob("testdata/*.hlo")) + sorted(ROOT.glob("testdata/fusion/*.hlo"))

REDUCE_THEN_NEGATE = """
HloModule m
add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
ENTRY e {
  p = f32[128,1024] parameter(0)
  x = f32[128] parameter(1)
  e = f32[128,1024] exponential(p)
  c = f32[] constant(0)
  r = f32[128] reduce(e, c), dimensions={1}, to_apply=add
  n = f32[128] negate(r)
  ROOT t = (f32[128], f32[128,1024], f32[128]) tuple(n, e, x)
}
"""


def _signature(analysis) -> tuple:
    """What a user of an analysis reads: the emitter, its roots and heroes, its launch."""
    return (analysis.emitter_kind, [id(r) for r in analysis.roots], [id(h) for h in analysis.heroes],
            analysis.launch_dimensions())


def test_a_fusion_changed_in_place_is_analyzed_again_after_invalidate():
    m = parse_module(REDUCE_THEN_NEGATE)
    comp, editor = m.entry, FusionEditor(m)
    fusion = editor.wrap_in_fusion(comp.instruction("n"), "kLoop")
    cache = HloFusionAnalysisCache(H100)
    before = cache.get(fusion)
    assert before.emitter_kind == "loop"
    e = comp.instruction("e")
    cache.get_pair(comp.instruction("r"), fusion)
    # fusing the reduce, then its producer (which keeps another user), changes the fusion in place
    assert editor.fuse_producer_into_consumer(comp.instruction("r"), fusion, "kInput") is fusion
    cache.get_pair(e, fusion)
    assert editor.fuse_producer_into_consumer(e, fusion, "kInput") is fusion
    assert e.parent is comp and e not in fusion.operands
    assert cache.get(fusion) is before  # stale until the pass says the fusion changed
    cache.invalidate(fusion)
    after = cache.get(fusion)
    assert after is not before and after.emitter_kind == "reduction"
    # the pair with `e` goes too, though `e` no longer feeds the fusion (XLA keeps both sides)
    assert (e, fusion) not in cache._pairs


def test_invalidating_a_producer_drops_its_pairs_and_nothing_else():
    m = parse_module(REDUCE_THEN_NEGATE)
    comp = m.entry
    e, r, n = (comp.instruction(k) for k in ("e", "r", "n"))
    cache = HloFusionAnalysisCache(H100)
    er, rn, alone = cache.get_pair(e, r), cache.get_pair(r, n), cache.get(n)
    cache.invalidate(e)
    assert cache.get_pair(e, r) is not er
    assert cache.get_pair(r, n) is rn and cache.get(n) is alone


class _CheckingCache(HloFusionAnalysisCache):
    """Compares every analysis it hands out with a fresh one: a stale entry raises."""

    def get(self, instr):
        return self._checked(super().get(instr), self._analyze(instr), instr.name)

    def get_pair(self, producer, consumer):
        fresh = self._analyze_pair(producer, consumer)
        return self._checked(super().get_pair(producer, consumer), fresh, f"{producer.name}->{consumer.name}")

    @staticmethod
    def _checked(cached, fresh, what: str):
        if _signature(cached) != _signature(fresh):
            raise AssertionError(f"stale analysis of {what}: {cached} instead of {fresh}")
        return cached


class _NeverForgets(_CheckingCache):
    def invalidate(self, instr) -> None:
        pass


def _optimize_with(cache_type: type, path: Path, monkeypatch) -> None:
    model_type = gpu_model.GpuPerformanceModel  # what the fusion passes build their model with

    def model(device):
        return model_type(device, analyses=cache_type(device))

    monkeypatch.setattr(gpu_model, "GpuPerformanceModel", model)
    module = parse_module(path.read_text(), str(path))
    build_gpu_pipeline().run_with(module, RunOptions(device=H100))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.stem)
def test_the_fusion_passes_never_use_a_stale_analysis(path, monkeypatch):
    _optimize_with(_CheckingCache, path, monkeypatch)


def test_the_check_catches_a_cache_that_never_forgets(monkeypatch):
    # priority fusion fuses into the concatenate fusion in place: its loop analysis goes stale
    with pytest.raises(PipelineError, match="stale analysis"):
        _optimize_with(_NeverForgets, ROOT / "testdata" / "fusion" / "concatenate.hlo", monkeypatch)


def test_invalidation_leaves_no_partner_behind():
    """A producer costed again after each step of one of its many users keeps no trace of the
    consumers it was paired with before: invalidating either side forgets the pair on both."""
    m = parse_module(REDUCE_THEN_NEGATE)
    e, r, n = (m.entry.instruction(x) for x in ("e", "r", "n"))
    cache = HloFusionAnalysisCache(H100)
    for _ in range(3):
        cache.get_pair(e, r)
        cache.invalidate(r)  # the consumer changed
    assert not cache._consumers_of.get(e) and not cache._producers_of.get(r)
    cache.get_pair(r, n)
    cache.invalidate(r)  # the producer changed
    assert not cache._producers_of.get(n) and not cache._consumers_of.get(r)
    assert cache.get_pair(e, r) is not None and cache._consumers_of[e] == {r: None}
