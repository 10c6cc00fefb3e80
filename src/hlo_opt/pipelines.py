"""The XLA:GPU pass pipeline as data (xla-facts.md section e; `gpu_compiler.cc`,
`fusion_pipeline.cc`), in XLA's order and with XLA's pipeline and pass names.

`GPU_PIPELINES` lists the top-level pipelines that `hlo-opt --pipeline gpu` runs one after another.
Each entry names a pass (`p("cse", is_layout_sensitive=False)` builds `PASS_REGISTRY["cse"](...)`),
a fixed point of one pass (`fix(p("algsimp"))`) or a nested pipeline (`pipe(...)`, `fix=True` for
XLA's `HloPassFix<HloPassPipeline>`).

Passes not written yet are listed once, in `PLANNED_PASSES`, with a one-line description:
`--list-passes` shows them as "(planned)" and `build_pipeline` leaves them out of the run (and
drops sub-pipelines left empty). Adding `src/hlo_opt/passes/<name>.py` (or a package) with a
registered pass of that name is all it takes to put it into the pipeline: a registered pass
always wins over its planned line, which can then be deleted. The options given here are passed
to the pass class as keyword arguments (dataclass fields). Pass names not yet implemented were
taken from XLA's sources at the facts' commit; check each one against its `name()` when writing it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

from hlo_common.hlo_pass.pass_base import PASS_REGISTRY
from hlo_common.hlo_pass.pipeline import HloPassFix, HloPassPipeline, PipelineSequence


@dataclass(frozen=True)
class PassSpec:
    name: str
    options: tuple[tuple[str, Any], ...] = ()
    fixed_point: bool = False


@dataclass(frozen=True)
class PipelineSpec:
    name: str
    items: tuple[Union[PassSpec, "PipelineSpec"], ...] = field(default_factory=tuple)
    fixed_point: bool = False


def p(name: str, **options: Any) -> PassSpec:
    return PassSpec(name, tuple(sorted(options.items())))


def fix(spec: PassSpec) -> PassSpec:
    return PassSpec(spec.name, spec.options, fixed_point=True)


def pipe(name: str, *items: PassSpec | PipelineSpec, fix: bool = False) -> PipelineSpec:
    return PipelineSpec(name, tuple(items), fixed_point=fix)


# Priority fusion and multi-output fusion (passes/priority_fusion.py, passes/multi_output_fusion.py)
# run in the `fusion` pipeline below (FusionPipeline in fusion_pipeline.cc).
PRIORITY_FUSION = "priority-fusion"
MULTI_OUTPUT_FUSION = "multi_output_fusion"

GPU_PIPELINES: tuple[PipelineSpec, ...] = (
    pipe("pre-spmd-partitioner",
         p("convert-memory-placement-to-internal-annotations"),
         p("flatten-call-graph"), p("call-inliner"), p("zero_sized_hlo_elimination"),
         p("conditional-canonicalizer"), p("topk-decomposer")),
    # num_partitions == 1: only sharding removal; > 1: Shardy import, propagation, partitioning
    # (each pass checks the module's num_partitions, as RunSPMDPasses chooses in gpu_compiler.cc)
    pipe("spmd-partitioner", p("sdy-round-trip-import"), p("sharding-remover"), p("sharding-propagation"),
         p("spmd-partitioning"), p("dce")),
    pipe("optimization",
         p("batched-gather-scatter-normalizer"), p("dot_dimension_sorter"), p("dot_decomposer"),
         p("result_caster"), p("operand_upcaster"), p("rng-expander"), p("rng-bit-generator-expander"),
         p("comparison-expander"), p("zero_sized_hlo_elimination"), p("select-and-scatter-expander"),
         p("cholesky_expander"), p("triangular_solve_expander"), p("fft_expander"),
         p("qr_expander"), p("eigh_expander"), p("dynamic-index-splitter"),
         p("call-inliner"), p("stochastic_convert_decomposer"), p("convolution-4d-expander"),
         p("convolution-pred-expander"), p("batchnorm_expander"), p("logistic-expander"),
         p("conditional-canonicalizer"), p("dynamic_dimension_simplifier"), p("scan_expander"),
         p("stable-sort-expander"),
         pipe("simplification",
              p("zero_sized_hlo_elimination"), p("gather_simplifier"), p("gather_expander"),
              p("scatter_simplifier"), p("scatter_expander"), p("scatter-slice-simplifier"),
              p("dot-strength-reduction"), p("algsimp", is_layout_sensitive=False), p("simplify-sorts"),
              p("tuple-simplifier"), p("while-loop-constant-sinking"), p("simplify-while-loops"),
              p("slice-sinker"), p("reshape-mover", reshape_of_1d_broadcast_is_cheap=True),
              p("constant_folding"), p("simplify-conditional"),
              p("transpose-folding"), p("cse", is_layout_sensitive=False), p("dce"),
              fix=True),
         p("dot-merger"), p("dot_dimension_normalizer"), p("transpose-folding"),
         pipe("simplification-2", p("convert-mover"), p("algsimp", is_layout_sensitive=False), fix=True),
         p("computation-deduplicator")),
    pipe("collective-optimizations",
         p("all-reduce-simp"), p("all-reduce-folder"), p("reduce-scatter-creator"),
         p("all-reduce-reassociate"),
         p("all-gather-broadcast-reorder"), p("all-reduce-promotion"), p("dce")),
    pipe("conv_canonicalization",
         p("cudnn-conv-rewriter"), p("cudnn-fused-convolution-rewriter"),
         p("gpu-conv-padding-legalization"), p("cudnn_pad_for_convolutions"),
         p("call-inliner"), p("tuple-simplifier"),
         p("algsimp", is_layout_sensitive=False), p("constant_folding")),
    pipe("layout assignment",
         p("flatten-call-graph"), p("layout-assignment"), p("optimize_input_output_buffer_alias")),
    pipe("layout normalization",
         p("reshape-decomposer"), fix(p("move_copy_to_users")), p("layout_normalization"),
         fix(p("algsimp", is_layout_sensitive=True)), p("broadcast_canonicalizer"),
         p("scatter_simplifier")),
    pipe("hlo normalization",
         fix(p("algsimp", is_layout_sensitive=True)), p("bitcast_dtypes_expander"),
         p("transpose-folding", fold_convolutions=False), p("reshape-decomposer"), p("reduce-decomposer"),
         # Triton GEMM fusions (passes/gemm_fusion.py): dots Triton takes leave the cuBLAS path
         p("splitk-rewriter"), p("triton-gemm-rewriter"), p("hoist-fused-bitcasts"),
         p("gemm-fusion-swap-operands"),
         p("cublas-gemm-rewriter"), p("cublas-gemm-broadcast-folding-rewriter"),
         p("layout_normalization"), p("algsimp", is_layout_sensitive=True), p("scatter_simplifier"),
         p("broadcast_canonicalizer"), p("reduction-degenerate-dim-remover"),
         p("reduction-layout-normalizer"), p("reduction-dimension-grouper"),
         fix(p("reduction-splitter")), fix(p("tree-reduction-rewriter"))),
    pipe("post-layout_assignment",
         p("float-normalization-bf16"), p("cublas-gemm-broadcast-folding-rewriter"),
         p("reshape-decomposer"), p("layout_normalization"), p("scatter_simplifier"),
         p("tuple-simplifier"), fix(p("algsimp", is_layout_sensitive=True)),
         p("simplify-fp-conversions"), p("cse", is_layout_sensitive=True)),
    pipe("pre-fusion", p("rename-instructions")),
    pipe("fusion",
         p("variadic-op-splitter"), p("sort-iota-fusion"),
         # where XLA runs SoftmaxRewriterTriton (Triton normalization fusions): ours, no Triton
         p("normalization-fusion"),
         p(PRIORITY_FUSION),
         p("cse", is_layout_sensitive=True, only_fusion_computations=True), p("dce"),
         p(MULTI_OUTPUT_FUSION),
         p("cse", is_layout_sensitive=True, only_fusion_computations=True), p("dce")),
    # RunPostFusionPasses' combiners, then RunPostFusionCollectiveOptimizationPasses' async pairs
    pipe("post-fusion optimization", p("rename_fusions"), p("all-gather-combiner"), p("all-reduce-combiner"),
         p("reduce-scatter-combiner"), p("async-collective-creator"), p("dce"), p("tuple-simplifier")),
    pipe("post-fusion-simplification-pipeline",
         p("algsimp", is_layout_sensitive=True), p("computation-deduplicator")),
    pipe("autotuner", p("fusion-wrapper"), p("config-assigner")),
    pipe("pre-scheduling-copy-insertion",
         p("dce"), p("loop-schedule-linearizer"), p("copy-insertion"), p("copy_fusion"),
         p("sanitize-constant-names")),
    pipe("scheduling", p("hlo-memory-scheduler"), p("post-scheduling-copy-insertion")),
    pipe("post-scheduling-passes",
         p("rematerialization"), p("optimization-barrier-expander"), p("fusion-wrapper"),
         p("sanitize-constant-names")),
)

# Every pass name the GPU pipeline uses that has no implementation yet, with what it will do.
PLANNED_PASSES: dict[str, str] = {
    "all-gather-broadcast-reorder": "AllGatherBroadcastReorder: all-gather(broadcast) -> broadcast(...)",
    "all-reduce-folder": "AllReduceFolder: fold all-reduce(all-reduce) over compatible groups",
    "all-reduce-promotion": "AllReducePromotion: 16-bit integer all-reduce computed in 32 bits",
    "all-reduce-reassociate": "AllReduceReassociate: add(all-reduce(x), all-reduce(y)) -> all-reduce(add)",
    "batched-gather-scatter-normalizer": "BatchedGatherScatterNormalizer: batch dims -> iota indices",
    "bitcast_dtypes_expander": "BitcastDtypesExpander: bitcast-convert between widths -> shifts and masks",
    "broadcast_canonicalizer": "BroadcastCanonicalizer: broadcast dimensions sorted, transpose added",
    "comparison-expander": "ComparisonExpander: total-order float comparisons -> integer compares",
    "computation-deduplicator": "HloComputationDeduplicator: identical computations share one copy",
    "conditional-canonicalizer": "ConditionalCanonicalizer: conditional results become tuples",
    "config-assigner": "ConfigAssignerPass: record library/emitter choices in backend_config",
    "convert-memory-placement-to-internal-annotations":
        "ConvertMemoryPlacementToInternalAnnotations: memory-placement calls -> annotations",
    "convert-mover": "ConvertMover: move converts across data-movement ops toward narrower types",
    "convolution-4d-expander": "Convolution4DExpander: degenerate 4D convolutions -> lower rank",
    "convolution-pred-expander": "ConvolutionPredExpander: pred convolutions computed in f16",
    "copy_fusion": "CopyFusion: fuse copies added by copy insertion into their producers",
    "cublas-gemm-broadcast-folding-rewriter": "GemmBroadcastFoldingRewriter: gemm broadcast operands folded",
    "dot-merger": "DotMerger: dots sharing an operand merged into one dot",
    "dot_dimension_normalizer": "DotDimensionNormalizer: dots without batch dims normalized",
    "dynamic-index-splitter": "DynamicIndexSplitter: vector indices of dynamic-slice -> scalars",
    "dynamic_dimension_simplifier": "DynamicDimensionSimplifier: folds get/set-dimension-size chains",
    "eigh_expander": "EighExpander: eigh custom calls -> Jacobi iterations",
    "operand_upcaster": "OperandUpcaster: dot/conv operands converted to the result precision",
    "optimization-barrier-expander": "OptimizationBarrierExpander: opt-barriers removed after scheduling",
    "optimize_input_output_buffer_alias": "OptimizeInputOutputBufferAlias: alias donated inputs to outputs",
    "qr_expander": "QrExpander: qr custom calls -> Householder loops",
    "reduce-decomposer": "ReduceDecomposer: variadic and layout-changing reduces split",
    "rematerialization": "HloRematerialization: recompute values to fit the memory limit",
    "rename-instructions": "AddTrackingSuffixToInstructionNames: stable names before fusion",
    "result_caster": "ResultCaster: dots with a wider result computed then converted",
    "scatter-slice-simplifier": "ScatterSliceSimplifier: scatter feeding a slice shrunk",
    "stable-sort-expander": "StableSortExpander: stable sort via an iota tie-breaker",
    "topk-decomposer": "TopkDecomposer: topk -> sort + slice",
    "variadic-op-splitter": "VariadicOpSplitter: concatenates with too many operands split",
}


def pipeline_pass_names(specs: tuple[PipelineSpec, ...] = GPU_PIPELINES) -> list[str]:
    """Every pass name the pipelines use (sorted, once each)."""
    names: set[str] = set()

    def walk(item: PassSpec | PipelineSpec) -> None:
        if isinstance(item, PipelineSpec):
            for sub in item.items:
                walk(sub)
        else:
            names.add(item.name)

    for spec in specs:
        walk(spec)
    return sorted(names)


def build_pass(spec: PassSpec, overrides: dict[str, dict[str, Any]] | None = None):
    """The pass object for `spec`, or None when the pass is planned but not written yet.
    `overrides` maps a pass name to options that replace or add to the spec's."""
    cls = PASS_REGISTRY.get(spec.name)
    if cls is None:
        if spec.name not in PLANNED_PASSES:
            raise KeyError(f"pipeline names unknown pass '{spec.name}' (neither registered nor planned)")
        return None
    options = dict(spec.options) | (overrides or {}).get(spec.name, {})
    try:
        instance = cls(**options)
    except TypeError as exc:
        raise TypeError(f"pipelines.py gives pass '{spec.name}' options {options} that "
                        f"{cls.__name__} does not accept: {exc}") from exc
    return HloPassFix(instance) if spec.fixed_point else instance


def build_pipeline(spec: PipelineSpec, overrides: dict[str, dict[str, Any]] | None = None
                   ) -> HloPassPipeline | HloPassFix | None:
    """The runnable pipeline for `spec`; planned passes are left out, empty pipelines dropped."""
    pipeline = HloPassPipeline(spec.name)
    for item in spec.items:
        built = (build_pipeline(item, overrides) if isinstance(item, PipelineSpec)
                 else build_pass(item, overrides))
        if built is not None:
            pipeline.add_pass(built)
    if not pipeline.passes:
        return None
    return HloPassFix(pipeline) if spec.fixed_point else pipeline


def build_gpu_pipeline(overrides: dict[str, dict[str, Any]] | None = None) -> PipelineSequence:
    """`--pipeline gpu`: every top-level pipeline that has at least one implemented pass.
    `overrides`: {pass name: options} for every use of that pass (tests turn on test knobs so,
    e.g. {"layout-assignment": {"vary_layouts_seed": 3}})."""
    from hlo_opt.passes import load_all_passes

    load_all_passes()
    sequence = PipelineSequence("gpu")
    for spec in GPU_PIPELINES:
        built = build_pipeline(spec, overrides)
        if built is not None:
            sequence.pipelines.append(built)
    return sequence


def build_pass_list(names: list[str], pipeline_name: str = "transforms_pipeline") -> PipelineSequence:
    """`--passes A,B`: exactly these passes, in this order, default options (XLA's hlo-opt)."""
    from hlo_opt.passes import load_all_passes

    load_all_passes()
    pipeline = HloPassPipeline(pipeline_name, [PASS_REGISTRY[n]() for n in names])
    return PipelineSequence(pipeline_name, [pipeline])
