"""The one cache of fusion analyses hlo-opt's fusion passes share (XLA's `HloFusionAnalysisCache`,
`xla/service/gpu/model/fusion_analysis_cache.{h,cc}`).

Where it sits: the GPU performance model asks it for the launch dimensions of a kernel and of a
producer fused into a consumer; the legality rules (`hlo_opt.fusion.gpu_fusible`) ask it for the
emitter a fusion would get; priority fusion hands the model's cache to the rules, so an analysis is
computed once for both. A pass that changes an instruction (fuses into it, replaces it) calls
`invalidate(instr)`: the instruction's own analysis and every producer-consumer analysis it takes
part in, as producer or as consumer, are dropped, whatever its operands are now.

    >>> cache = HloFusionAnalysisCache(H100)
    >>> cache.get(fusion).emitter_kind                  # computed, then kept
    'loop'
    >>> cache.get_pair(producer, fusion) is cache.get_pair(producer, fusion)
    True
    >>> cache.invalidate(fusion)                         # after an edit of `fusion`
    >>> cache.get_pair(producer, fusion)                 # computed again

Keys are the instructions themselves (identity), and the maps are never iterated, so nothing
depends on hashing order.
"""

from __future__ import annotations

from hlo_common.gpu.device import H100, DeviceDescription
from hlo_common.gpu.hlo_fusion_analysis import FusionAnalysis
from hlo_common.hlo.ir import HloInstruction


class HloFusionAnalysisCache:
    """Fusion analyses of instructions and of (producer, consumer) pairs for one device, kept
    until `invalidate` names one of their instructions."""

    def __init__(self, device: DeviceDescription = H100):
        self.device = device
        self._single: dict[HloInstruction, FusionAnalysis] = {}
        self._pairs: dict[tuple[HloInstruction, HloInstruction], FusionAnalysis] = {}
        # the other side of every cached pair, by each side (XLA's consumers_for_producers_ and
        # producers_for_consumers_): invalidation finds a pair even after operands changed
        # (each side's partners kept as a dict used as an ordered set, and dropped from the other
        # side's at invalidation: a producer with many users re-costed after each step of theirs
        # would otherwise pile up the consumers of every pair it ever had)
        self._consumers_of: dict[HloInstruction, dict[HloInstruction, None]] = {}
        self._producers_of: dict[HloInstruction, dict[HloInstruction, None]] = {}

    def get(self, instr: HloInstruction) -> FusionAnalysis:
        """The analysis of `instr` as a kernel of its own (a fusion, or one op as a fusion)."""
        analysis = self._single.get(instr)
        if analysis is None:
            analysis = self._single[instr] = self._analyze(instr)
        return analysis

    def get_pair(self, producer: HloInstruction, consumer: HloInstruction) -> FusionAnalysis:
        """The analysis of `producer` fused into `consumer`, without building the fusion."""
        key = (producer, consumer)
        analysis = self._pairs.get(key)
        if analysis is None:
            analysis = self._pairs[key] = self._analyze_pair(producer, consumer)
            self._consumers_of.setdefault(producer, {})[consumer] = None
            self._producers_of.setdefault(consumer, {})[producer] = None
        return analysis

    def invalidate(self, instr: HloInstruction) -> None:
        """Forget `instr`'s analysis and every pair analysis with `instr` on either side."""
        self._single.pop(instr, None)
        pairs = self._pairs
        for consumer in self._consumers_of.pop(instr, ()):
            pairs.pop((instr, consumer), None)
            back = self._producers_of.get(consumer)
            if back is not None:
                back.pop(instr, None)
        for producer in self._producers_of.pop(instr, ()):
            pairs.pop((producer, instr), None)
            back = self._consumers_of.get(producer)
            if back is not None:
                back.pop(instr, None)

    # the computations themselves (a checking cache in the tests overrides these)
    def _analyze(self, instr: HloInstruction) -> FusionAnalysis:
        return FusionAnalysis.of_instruction(instr, self.device)

    def _analyze_pair(self, producer: HloInstruction, consumer: HloInstruction) -> FusionAnalysis:
        return FusionAnalysis.of_producer_consumer(producer, consumer, self.device)


__all__ = ["HloFusionAnalysisCache"]
