"""XLA:GPU's analytical performance model: run time of one kernel, of a producer fused into its
consumers, and of a producer-consumer multi-output fusion (XLA's `GpuPerformanceModel`,
`xla/service/gpu/model/gpu_performance_model{,_base}.cc`).

Where it sits: hlo-opt's priority fusion ranks producers by `estimate_run_times` and
multi-output fusion checks `estimate_run_times_for_multi_output_fusion`; one model per pass run,
figures cached per instruction and per (producer, consumer) pair until `invalidate`. Its fusion
analyses come from one `HloFusionAnalysisCache` (`analyses`), which the pass shares with the
legality rules.

    >>> from hlo_common.hlo.ir import parse_module
    >>> m = parse_module("ENTRY e { p = f32[1024,1024] parameter(0) ROOT n = f32[1024,1024] negate(p) }")
    >>> t = GpuPerformanceModel().estimate_instruction(m.entry.root)
    >>> round(t.exec_time * 1e6, 2), t.bytes_read, t.bytes_written
    (2.5, 4194304, 4194304)

One kernel (`estimate_instruction`): launch dims from the fusion analysis; compute time =
flops / (2 x clock x min(threads per block, FPUs per SM) x min(blocks, SMs)); read time per
operand with `read_time_with_dram_heuristic` (first read from DRAM, re-reads from L2 at 2.5x or
L1 at 8x more bandwidth when the operand fits; uncoalesced reads get element size / 64 of the
DRAM bandwidth; all bandwidths capped at blocks x clock x 32 bytes); write time = bytes / DRAM
bandwidth; run time = compute + memory - 0.95 x min(compute, memory). Times are in seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.gpu.device import DeviceDescription, H100
from hlo_opt.gpu_model.coalescing import uncoalesced_inputs
from hlo_opt.gpu_model.cost_analysis import GpuHloCostAnalysis, shape_bytes
from hlo_opt.gpu_model.fusion_analysis_cache import HloFusionAnalysisCache
from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.opcodes import is_elementwise

KERNEL_LAUNCH_OVERHEAD = 1e-6        # kKernelLaunchOverhead
NCCL_KERNEL_LAUNCH_OVERHEAD = 5e-6   # kNcclKernelLaunchOverhead
L2_CACHE_SPEEDUP = 2.5               # kL2CacheSpeedup
L1_CACHE_SPEEDUP = 8.0               # kL1CacheSpeedup
MEMORY_COMPUTE_PARALLELISM = 0.95    # kMemoryComputeParallelism


@dataclass
class EstimateRunTimeData:
    """One kernel's estimate (seconds; flops and bytes as counted by the cost analysis)."""

    flops: int
    bytes_read: int
    bytes_written: int
    read_time: float
    write_time: float
    compute_time: float
    exec_time: float
    num_threads: int = 0
    num_blocks: int = 0


@dataclass
class RunTimes:
    time_unfused: float
    time_fused: float


class GpuPerformanceModel:
    """See the module docstring. `cost_analysis` may be shared (or given an op profile), and so
    may `analyses`."""

    def __init__(self, device: DeviceDescription = H100, cost_analysis: GpuHloCostAnalysis | None = None,
                 analyses: HloFusionAnalysisCache | None = None):
        self.device = device
        self.cost = cost_analysis if cost_analysis is not None else GpuHloCostAnalysis(device)
        self.analyses = analyses if analyses is not None else HloFusionAnalysisCache(device)
        self._instr: dict[HloInstruction, EstimateRunTimeData] = {}
        self._fused: dict[HloInstruction, dict[HloInstruction, EstimateRunTimeData]] = {}
        d = device
        self._bw = float(d.memory_bandwidth)
        self._per_block_bw = d.clock_rate_ghz * 1e9 * d.memory_transactions_per_clock
        self._l1_total = d.l1_cache_size_per_SM * d.core_count
        self._l2_size = d.l2_cache_size
        self._transaction_bytes = d.dram_to_l2_transaction_size_bytes

    # -- caches ----------------------------------------------------------------------------------
    def invalidate(self, instr: HloInstruction) -> None:
        """Forget every figure of `instr` (changed or new), as producer and as consumer: its
        estimates, its costs and its fusion analyses."""
        self._instr.pop(instr, None)
        self.cost.invalidate(instr)
        self.analyses.invalidate(instr)
        self._fused.pop(instr, None)
        for op in instr.operands:
            if op.opcode == "get-tuple-element":
                op = op.operands[0]
            per = self._fused.get(op)
            if per is not None:
                per.pop(instr, None)

    # -- building blocks (GpuPerformanceModelBase) ------------------------------------------------
    def read_time_with_dram_heuristic(self, num_blocks: int, n_bytes_net: int, n_bytes_total: int,
                                      element_bytes: int, coalesced: bool) -> float:
        # (called per operand of every pair costed: the bandwidth caps written out)
        rate = 1.0 if coalesced else element_bytes / self._transaction_bytes
        dram = self._bw * rate
        rest = self._bw
        if n_bytes_net < self._l2_size:
            rest *= L2_CACHE_SPEEDUP
            if n_bytes_net < self._l1_total:
                rest *= L1_CACHE_SPEEDUP
        else:
            rest *= rate
        cap = num_blocks * self._per_block_bw
        if dram > cap:
            dram = cap
        if rest > cap:
            rest = cap
        from_dram = n_bytes_total if n_bytes_total < n_bytes_net else n_bytes_net
        return from_dram / dram + (n_bytes_total - from_dram) / rest

    def read_time(self, num_blocks: int, n_bytes_net: int, n_bytes_total: int) -> float:
        """Coalesced reads of an operand (XLA's ReadTime)."""
        return self.read_time_with_dram_heuristic(num_blocks, n_bytes_net, n_bytes_total, 4, True)

    def write_time(self, bytes_written: int) -> float:
        return bytes_written / self._bw

    def compute_time(self, flops: float, num_blocks: int, threads_per_block: int) -> float:
        d = self.device
        fpus = min(threads_per_block, d.fpus_per_core) * min(num_blocks, d.core_count)
        per_ns = int(d.clock_rate_ghz * 2 * fpus)  # XLA keeps flops per ns as an integer
        return flops / max(per_ns, 1) * 1e-9

    @staticmethod
    def combine(compute: float, memory: float) -> float:
        return compute + memory - min(compute, memory) * MEMORY_COMPUTE_PARALLELISM

    # -- utilizations ----------------------------------------------------------------------------
    def operand_utilization(self, instr: HloInstruction, operand: HloInstruction) -> float:
        """How many times `instr` reads each element of `operand` (summed over the outputs of a
        multi-output `operand` that `instr` reads through get-tuple-elements)."""
        res = 0.0
        for i, o in enumerate(instr.operands):
            if o is operand or (o.opcode == "get-tuple-element" and o.operands[0] is operand):
                res += self.cost.operand_utilization(instr, i)
        return res

    def _common_utilization(self, producer: HloInstruction, index: int, consumer: HloInstruction,
                            pair: _PairOperands) -> float:
        c_index = pair.consumer_first.get(producer.operands[index])
        if c_index is None:
            return 0.0
        elementwise = is_elementwise(producer.opcode)
        if not elementwise and producer.opcode == "fusion":
            comp = producer.fused_computation()
            elementwise = self.cost.common_elementwise_utilization(
                producer, comp.parameter(index), comp.root) == 1.0
        if not elementwise:
            return 0.0
        if consumer.opcode == "fusion":
            comp = consumer.fused_computation()
            common = comp.parameter(c_index)
            res = 0.0
            for i in pair.producer_slots:
                res += self.cost.common_elementwise_utilization(consumer, common, comp.parameter(i))
            return res
        return 1.0 if is_elementwise(consumer.opcode) else 0.0

    def shared_operand_bytes_accessed(self, producer: HloInstruction, consumer: HloInstruction,
                                      operand: HloInstruction, util: float | None = None,
                                      pair: _PairOperands | None = None) -> int:
        """Bytes the fused kernel reads from `operand` (XLA's GetSharedOperandBytesAccessed);
        `util` (the consumer's utilization of the producer) and `pair` when the caller has them."""
        if util is None:
            util = self.operand_utilization(consumer, producer)
        if pair is None:
            pair = _PairOperands(producer, consumer)
        p_index = pair.producer_first.get(operand)
        c_index = pair.consumer_first.get(operand)
        if p_index is None:  # read by one side only (most operands): no common reads
            by_consumer = 0 if c_index is None else self.cost.cost(consumer).operand_bytes[c_index]
            return by_consumer
        by_producer = self.cost.cost(producer).operand_bytes[p_index]
        by_consumer = 0 if c_index is None else self.cost.cost(consumer).operand_bytes[c_index]
        common = self._common_utilization(producer, p_index, consumer, pair)
        common_bytes = round(shape_bytes(operand.shape) * common) if common else 0
        return round(by_producer * util) + by_consumer - common_bytes

    # -- estimates -------------------------------------------------------------------------------
    def estimate_instruction(self, instr: HloInstruction) -> EstimateRunTimeData:
        """XLA's EstimateRunTimeForInstruction (cached)."""
        data = self._instr.get(instr)
        if data is not None:
            return data
        cost = self.cost.cost(instr)
        analysis = self.analyses.get(instr)
        blocks, threads = analysis.launch_dimensions()
        compute = self.compute_time(cost.flops, blocks, threads)
        uncoalesced = uncoalesced_inputs(analysis)
        read = 0.0
        bytes_read = 0
        first_index: dict[HloInstruction, int] = {}
        for i, operand in enumerate(instr.operands):
            first = first_index.setdefault(operand, i)
            total = cost.operand_bytes[first]
            net = min(shape_bytes(operand.shape), total)
            bytes_read += total
            read += self.read_time_with_dram_heuristic(blocks, net, total, _element_bytes(operand),
                                                       operand not in uncoalesced)
        write = self.write_time(cost.output_bytes)
        data = EstimateRunTimeData(int(cost.flops), bytes_read, cost.output_bytes, read, write, compute,
                                   self.combine(compute, read + write), threads, blocks)
        self._instr[instr] = data
        return data

    def estimate_fused(self, producer: HloInstruction, consumer: HloInstruction,
                       producer_writes_side_output: bool = False) -> EstimateRunTimeData:
        """`producer` fused into `consumer` (XLA's EstimateRunTimeForFusion; cached unless the
        producer's output is kept as a side output)."""
        if not producer_writes_side_output:
            per = self._fused.get(producer)
            if per is not None and consumer in per:
                return per[consumer]
        p_rt = self.estimate_instruction(producer)
        c_rt = self.estimate_instruction(consumer)
        util = self.operand_utilization(consumer, producer)
        analysis = self.analyses.get_pair(producer, consumer)
        blocks, threads = analysis.launch_dimensions()
        flops = p_rt.flops * util + c_rt.flops
        compute = self.compute_time(flops, blocks, threads)
        uncoalesced = uncoalesced_inputs(analysis)
        read = 0.0
        bytes_read = 0
        pair = _PairOperands(producer, consumer)  # positions found once, not per operand
        for operand in _unique_fusion_operands(producer, consumer):
            total = self.shared_operand_bytes_accessed(producer, consumer, operand, util, pair)
            net = min(shape_bytes(operand.shape), total)
            bytes_read += total
            read += self.read_time_with_dram_heuristic(blocks, net, total, _element_bytes(operand),
                                                       operand not in uncoalesced)
        written = c_rt.bytes_written
        write = c_rt.write_time
        if producer_writes_side_output:
            written += p_rt.bytes_written
            write += p_rt.write_time
        data = EstimateRunTimeData(int(flops), bytes_read, written, read, write, compute,
                                   self.combine(compute, read + write), threads, blocks)
        if not producer_writes_side_output:
            self._fused.setdefault(producer, {})[consumer] = data
        return data

    def estimate_run_times(self, producer: HloInstruction, consumers) -> RunTimes:
        """Priority fusion's question: `producer` and `consumers` as separate kernels, against
        `producer` duplicated into every consumer (XLA's EstimateRunTimes)."""
        consumers = list(consumers)
        p_rt = self.estimate_instruction(producer)
        unfused = KERNEL_LAUNCH_OVERHEAD * (len(consumers) + 1) + p_rt.exec_time
        fused = KERNEL_LAUNCH_OVERHEAD * len(consumers)
        # the caches read here directly: a producer with many users is costed again after each
        # step that changes one of them, all the others answered from the caches
        singles = self._instr
        pairs = self._fused.get(producer)
        for c in consumers:
            data = singles.get(c)
            unfused += (data if data is not None else self.estimate_instruction(c)).exec_time
            data = pairs.get(c) if pairs is not None else None
            if data is None:
                data = self.estimate_fused(producer, c)
                pairs = self._fused.get(producer)
            fused += data.exec_time
        return RunTimes(unfused, fused)

    def estimate_run_times_for_multi_output_fusion(self, producer: HloInstruction,
                                                   consumer: HloInstruction) -> RunTimes:
        """Two kernels against one that also writes the producer's output."""
        p_rt = self.estimate_instruction(producer)
        c_rt = self.estimate_instruction(consumer)
        unfused = 2 * KERNEL_LAUNCH_OVERHEAD + p_rt.exec_time + c_rt.exec_time
        fused = KERNEL_LAUNCH_OVERHEAD + self.estimate_fused(producer, consumer, True).exec_time
        return RunTimes(unfused, fused)


class _PairOperands:
    """Where each operand first appears among a producer's and a consumer's operands, and the
    consumer's slots that read the producer (directly or through a get-tuple-element): looked up
    per operand of the fused kernel, so a fusion with many operands costs O(n), not O(n^2)."""

    __slots__ = ("producer_first", "consumer_first", "producer_slots")

    def __init__(self, producer: HloInstruction, consumer: HloInstruction):
        self.producer_first = _first_positions(producer.operands)
        self.consumer_first = _first_positions(consumer.operands)
        self.producer_slots = [i for i, o in enumerate(consumer.operands) if o is producer or (
            o.opcode == "get-tuple-element" and o.operands[0] is producer)]


def _first_positions(operands: list[HloInstruction]) -> dict[HloInstruction, int]:
    first: dict[HloInstruction, int] = {}
    for i, o in enumerate(operands):
        first.setdefault(o, i)
    return first


def _element_bytes(instr: HloInstruction) -> int:
    shape = instr.shape
    if not shape.is_array:
        return 4  # tuples and tokens: XLA's placeholder
    return shape.element_type.byte_size


def _unique_fusion_operands(producer: HloInstruction, consumer: HloInstruction) -> list[HloInstruction]:
    """Inputs of the fused kernel: the producer's operands, then the consumer's other operands
    (each once; a get-tuple-element of the producer is the producer)."""
    out: list[HloInstruction] = []
    seen: set = set()
    for o in producer.operands:
        if o not in seen:
            seen.add(o)
            out.append(o)
    for o in consumer.operands:
        if o is producer or (o.opcode == "get-tuple-element" and o.operands[0] is producer):
            continue
        if o not in seen:
            seen.add(o)
            out.append(o)
    return out
