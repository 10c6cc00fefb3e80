"""GemmFusion ("triton-gemm-rewriter"): each dot XLA:GPU would give Triton becomes a kCustom fusion
of kind `__triton_nested_gemm_fusion` holding the dot, the operand-side ops Triton reads through
(converts such as s8/s4/f8 -> bf16, bitcasts, reshapes, transposes, broadcasts, slices, cheap
elementwise ops) and the elementwise epilogue after it (`xla/backends/gpu/transforms/
gemm_fusion.cc`, with the fusibility rules of `xla/service/gpu/triton_tiling_propagation.cc`
and `support_legacy.cc`; see hlo_opt.triton_support).

Where it sits: "hlo normalization", after `splitk-rewriter` and before `cublas-gemm-rewriter`, on
sm_80 and newer (gpu_compiler.cc adds it for Ampere+ when --xla_gpu_enable_triton_gemm is on,
XLA's default). Dots it leaves - unsupported types or dimension numbers, tiny dots the loop
emitter computes - go on to cuBLAS or the elemental emitters as before. `hlo-opt
--xla_gpu_enable_triton_gemm=false` (or `--device a100`-class devices older than sm_80) keeps
every dot on the cuBLAS path. Priority fusion and multi-output fusion leave kCustom fusions
alone; the interpreter and the host backend evaluate the fused computation.

    p = bf16[8,128,512] reshape(bf16[1024,512] convert(s8[1024,512] w))
    d = f32[8,256,512] dot(a, p), lhs_batch_dims={1}, ...
    becomes
    d = f32[8,256,512] fusion(a, w), kind=kCustom, calls=%gemm_fusion_dot_computation,
        backend_config={"fusion_backend_config":{"kind":"__triton_nested_gemm_fusion",
          "block_level_fusion_config":{"num_warps":"2","output_tiles":[{"sizes":["1","16","8"]}],
          "num_ctas":1,"num_stages":1,...}}}

jaxlib 0.10's XLA (in an XLA with --xla_gpu_triton_gemm_any, its default) fuses pure matmuls
too, and without a device writes the same block-level config for every GEMM fusion: output
tiles of 16 x 8 (1 on batch dims), block_k 16 (the `"sizes"` backend config of the fused dot),
1 stage, 2 warps; DEFAULT_CONFIG below is that config.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from hlo_common.gpu.device import H100, DeviceDescription
from hlo_common.hlo.hlo_creation_utils import non_fusion_computations
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.hlo_pass.pass_base import DevicePass, register_pass
from hlo_opt.fusion.fusion_utils import FusionEditor
from hlo_opt.matmul_utils import CLASSICAL_EMITTER_TYPES, too_small_for_rewriting
from hlo_opt.triton_support import (
    ELEMENTWISE, LAYOUT_OPS, MAX_PARAMS_PER_DOT_OPERAND, is_effective_parameter, is_input_worth_fusing,
    is_output_worth_fusing, unsupported_dot, unsupported_instruction,
)

TRITON_GEMM_KIND = "__triton_nested_gemm_fusion"
DEFAULT_CONFIG = {"block_m": 16, "block_n": 8, "block_k": 16, "split_k": 1, "num_stages": 1, "num_warps": 2}
NEVER_FUSED = frozenset({"parameter", "tuple", "get-tuple-element", "reduce", "pad", "dynamic-slice"})


def block_level_config(root: HloInstruction, config: dict = DEFAULT_CONFIG) -> dict:
    """The fusion's backend config: the output tile of its root (block_m x block_n on the two
    minor dims, 1 on batch dims) in XLA's BlockLevelFusionConfig form."""
    rank = root.shape.rank
    tile = ([1] * max(0, rank - 2) + [config["block_m"], config["block_n"]])[-rank:] if rank else []
    return {"operation_queue_id": "0", "fusion_backend_config": {
        "kind": TRITON_GEMM_KIND,
        "block_level_fusion_config": {
            "num_warps": str(config["num_warps"]), "output_tiles": [{"sizes": [str(t) for t in tile]}],
            "num_ctas": 1, "num_stages": config["num_stages"], "is_tma_allowed": False,
            "is_warp_specialization_allowed": False, "waves_per_eu": 0}}}


def _prologue_fusible(node: HloInstruction, reshaped: bool, cc: tuple[int, int]) -> bool:
    """May `node`, read (through the ops already planned) by the dot, join the fusion?
    `reshaped`: a bitcast or reshape lies between it and the dot."""
    if node.opcode in NEVER_FUSED or unsupported_instruction(node, cc) is not None:
        return False
    if node.opcode == "slice" and reshaped:
        return False  # XLA cannot propagate a sliced dimension through a split (DimOrder rules)
    if node.opcode in ELEMENTWISE and node.opcode != "copy":
        if len(node.operands) == 2 and any(
                o.opcode == "broadcast" and o.operands[0].opcode in ("parameter", "constant")
                for o in node.operands):
            return True
        return is_input_worth_fusing(node)
    return True


def _added_parameters(node: HloInstruction) -> int:
    if node.opcode == "parameter" or (node.opcode == "constant" and node.shape.rank > 0):
        return 0
    return len(node.operands) - 1


def plan_operand(operand: HloInstruction, cc: tuple[int, int] = (9, 0),
                 max_params: int | None = MAX_PARAMS_PER_DOT_OPERAND) -> list[HloInstruction]:
    """The instructions fused on one dot operand's side, breadth first from the dot as XLA's
    BuildFusionPlanTowardOperands (a node that would take the fusion past `max_params`
    parameters waits until the others are done)."""
    queue = deque([(operand, False)])
    inputs, seen, fused = {id(operand)}, {id(operand)}, []
    requeued = 0
    while len(queue) > requeued:
        node, reshaped = queue.popleft()
        if max_params is not None and len(inputs) + _added_parameters(node) > max_params:
            queue.append((node, reshaped))
            requeued += 1
            continue
        requeued = 0
        if not _prologue_fusible(node, reshaped, cc):
            continue
        inputs.discard(id(node))
        fused.append(node)
        for op in node.operands:
            if id(op) not in seen:
                seen.add(id(op))
                inputs.add(id(op))
                queue.append((op, reshaped or node.opcode in ("bitcast", "reshape")))
    return fused


def _output_operand_ok(operand: HloInstruction) -> bool:
    """Other inputs an epilogue op may have: effective parameters, broadcasts of them or of
    scalars (XLA: 'Has multiple inputs - not properly analyzed yet' otherwise)."""
    if operand.opcode == "broadcast":
        inner = operand.operands[0]
        return inner.shape.rank == 0 or is_effective_parameter(inner)
    return is_effective_parameter(operand)


def plan_epilogue(dot: HloInstruction, cc: tuple[int, int] = (9, 0)) -> list[HloInstruction]:
    """The chain of single users fused after the dot (with their broadcast side inputs)."""
    fused: list[HloInstruction] = []
    cur = dot
    while len(cur.users) == 1:
        user = cur.users[0]
        if user.opcode not in ELEMENTWISE and user.opcode not in LAYOUT_OPS:
            break
        if unsupported_instruction(user, cc) is not None:
            break
        others = [o for o in user.operands if o is not cur]
        if not all(_output_operand_ok(o) for o in others) or not is_output_worth_fusing(user):
            break
        fused.append(user)
        for o in others:
            if o.opcode == "broadcast":
                fused.append(o)
                if o.operands[0].opcode == "constant" and o.operands[0].shape.rank == 0:
                    fused.append(o.operands[0])
        cur = user
    return fused


def _is_tiny_for_classical_emitters(dot: HloInstruction, threshold: int) -> bool:
    return too_small_for_rewriting(dot, threshold) and dot.shape.element_type.name in CLASSICAL_EMITTER_TYPES


def _build(dot: HloInstruction, members: list[HloInstruction], root: HloInstruction,
           editor: FusionEditor) -> HloInstruction:
    """The kCustom fusion of `members` (root `root`) in the root's place."""
    comp: HloComputation = dot.parent
    wanted = {id(m) for m in members}
    order = [i for i in reversed(comp.post_order()) if id(i) in wanted and i is not root]
    fusion = editor.wrap_in_fusion(root, "kCustom")
    for instr in order:
        if instr in fusion.operands:
            editor.fuse_producer_into_consumer(instr, fusion)
    module = comp.parent
    fusion.name = comp.unique_name(f"gemm_fusion_{dot.name}")
    body = fusion.fused_computation()
    body.name = module.unique_computation_name(f"{fusion.name}_computation")
    _order_as_xla(fusion)
    fusion.backend_config_data = block_level_config(fusion)
    for instr in body.instructions:
        if instr.opcode == "dot":
            instr.backend_config_data = {"sizes": [str(DEFAULT_CONFIG["block_k"])]}
    return fusion


def depth_first_order(comp: HloComputation) -> list[HloInstruction]:
    """The instructions in the depth-first post-order from the root, operands in order (how XLA
    lists a computation it rebuilt), then any the root does not reach, as they were."""
    order: list[HloInstruction] = []
    seen: set[int] = set()
    stack = [(comp.root, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
        elif id(node) not in seen:
            seen.add(id(node))
            stack.append((node, True))
            stack.extend((o, False) for o in reversed(node.operands) if id(o) not in seen)
    return order + [i for i in comp.instructions if id(i) not in seen]


def _order_as_xla(fusion: HloInstruction) -> None:
    """Parameters numbered, and instructions listed, in the depth-first post-order from the root
    with operands in order (lhs before rhs, the epilogue's operands last), as XLA's GemmFusion
    builds its fusions: the numbers and the order are part of the autotune key (the canonical
    text of the computation)."""
    body = fusion.fused_computation()
    order = depth_first_order(body)
    params = [i for i in order if i.opcode == "parameter"]
    old_operands = list(fusion.operands)
    fusion.set_operands([old_operands[p.parameter_number] for p in params])
    for k, p in enumerate(params):
        p.parameter_number = k
        p.name = body.unique_name(f"renumbered_param_{k}")
    for k, p in enumerate(params):
        p.name = body.unique_name(f"param_{k}")
    body.instructions = order


@register_pass
@dataclass
class GemmFusion(DevicePass):
    """Dots (with their prologue and epilogue) become Triton GEMM fusions (XLA's GemmFusion)."""

    name = "triton-gemm-rewriter"
    device: DeviceDescription = field(default=H100)
    enabled: bool = True  # XLA's --xla_gpu_enable_triton_gemm
    gemm_rewrite_size_threshold: int = 100  # XLA's --xla_gpu_gemm_rewrite_size_threshold

    def run_with_options(self, module: HloModule, options) -> bool:
        if getattr(options, "triton_gemm", True) is False:
            return False
        return super().run_with_options(module, options)

    def run(self, module: HloModule) -> bool:
        if not self.enabled or self.device.compute_capability < (8, 0):
            return False
        editor = FusionEditor(module)
        changed = False
        for comp in non_fusion_computations(module):
            for dot in [i for i in comp.post_order() if i.opcode == "dot"]:
                changed |= self._fuse(dot, editor)
        editor.flush()
        return changed

    def _fuse(self, dot: HloInstruction, editor: FusionEditor) -> bool:
        if _is_tiny_for_classical_emitters(dot, self.gemm_rewrite_size_threshold):
            return False
        cc = self.device.compute_capability
        if unsupported_dot(dot, cc) is not None:
            return False
        members = [dot]
        for operand in dict.fromkeys(dot.operands):
            members += plan_operand(operand, cc)
        epilogue = plan_epilogue(dot, cc)
        root = next((u for u in reversed(epilogue) if u.opcode not in ("broadcast", "constant")), dot)
        _build(dot, members + epilogue, root, editor)
        return True


__all__ = ["DEFAULT_CONFIG", "GemmFusion", "TRITON_GEMM_KIND", "block_level_config", "plan_epilogue",
           "plan_operand"]
