"""The tile config of a Triton GEMM fusion, read from its backend config and checked against the
device: XLA's block-level config (`block_level_fusion_config`: the root's output tile gives
block_m x block_n, the fused dot's `"sizes"` block_k, with num_warps, num_stages, num_ctas), or
the older `triton_gemm_config` (block_m, block_n, block_k, split_k, num_stages, num_warps) of
`__triton_gemm` fusions (`xla/service/gpu/backend_configs.proto`).

Where it sits: hlo_codegen.triton_gemm (package docstring); the thunk emitter reads the config of
every GEMM fusion before it writes anything. A block size or warp count that is not a power of
two, or tiles whose pipelined copies cannot fit the device's shared memory per block, is a
one-line HloError naming the fusion (XLA's `TritonGemmConfig` and the autotuner refuse such
configs too: `xla/service/gpu/autotuning/gemm_fusion_autotuner.cc`); so is an accumulator tile
of more than 4 times a thread's 255 registers (Triton would spend minutes compiling it, to spill).
"""

from __future__ import annotations

from hlo_common.errors import HloError
from hlo_common.gpu.device import DeviceDescription
from hlo_common.hlo.dtypes import PRIMITIVE_TYPES
from hlo_common.hlo.ir import HloInstruction

KEYS = ("block_m", "block_n", "block_k", "split_k", "num_stages", "num_warps")
# a fusion without a config gets what XLA's autotuner gives one without a device (hlo-opt's
# gemm-fusion writes the same: hlo_opt.passes.gemm_fusion.DEFAULT_CONFIG)
DEFAULT_CONFIG = {"block_m": 16, "block_n": 8, "block_k": 16, "split_k": 1, "num_stages": 1, "num_warps": 2}
MIN_DOT_TILE = 16  # tl.dot takes tiles of at least 16 on each side; smaller tiles are padded
REGISTERS = 255  # a thread's registers
MAX_ACC_PER_THREAD = 4 * REGISTERS  # XLA's largest configs hold 256 per thread; 4x is no real config


def _int(value, what: str, fusion: HloInstruction) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise HloError(f"%{fusion.name}: Triton GEMM config {what} is {value!r}, not an integer") from None


def fusion_config(fusion: HloInstruction) -> dict:
    """The config of a `__triton_gemm` / `__triton_nested_gemm_fusion` fusion as a dict of KEYS."""
    backend = fusion.backend_config_data if isinstance(fusion.backend_config_data, dict) else {}
    fbc = backend.get("fusion_backend_config") or {}
    legacy = fbc.get("triton_gemm_config")
    if isinstance(legacy, dict):
        return {k: _int(legacy.get(k, 1), k, fusion) for k in KEYS}
    if "block_level_fusion_config" not in fbc:  # not tuned yet: XLA's deviceless default
        return dict(DEFAULT_CONFIG)
    block = fbc.get("block_level_fusion_config") or {}
    tiles = block.get("output_tiles") or [{}]
    sizes = [_int(s, "output tile", fusion) for s in (tiles[0].get("sizes") or [])]
    if len(sizes) < 2:
        raise HloError(f"%{fusion.name}: Triton GEMM config without a 2-d output tile "
                       f"(block_level_fusion_config.output_tiles is {tiles!r:.80})")
    dots = [i for i in fusion.fused_computation().instructions if i.opcode == "dot"]
    dot_cfg = dots[0].backend_config_data if dots and isinstance(dots[0].backend_config_data, dict) else {}
    block_k = _int((dot_cfg.get("sizes") or [MIN_DOT_TILE])[0], "block_k (the dot's sizes)", fusion)
    block_m, block_n = _dot_tile(fusion.fused_computation().root, dots[0], sizes) if dots else sizes[-2:]
    return {"block_m": block_m, "block_n": block_n, "block_k": block_k, "split_k": 1,
            "num_stages": _int(block.get("num_stages", 1), "num_stages", fusion),
            "num_warps": _int(block.get("num_warps", 4), "num_warps", fusion)}


def _dot_tile(root: HloInstruction, dot: HloInstruction, sizes: list[int]) -> tuple[int, int]:
    """XLA tiles the root: the tile of the dot's M and N dims, through the elementwise epilogue
    and bitcasts that permute dims (`[8,4096,4]{1,2,0}` bitcast to `[8,4,4096]{2,1,0}`)."""
    dims = list(range(root.shape.rank))  # root dim -> dim of the current instruction
    node = root
    while node is not dot:
        below = next((o for o in node.operands if o.shape.is_array and o.shape.dims and
                      _reaches(o, dot)), None)
        if below is None:
            return sizes[-2], sizes[-1]
        if node.opcode in ("bitcast", "reshape", "transpose"):
            perm = _dim_map(node, below)
            if perm is None:
                return sizes[-2], sizes[-1]
            dims = [perm.get(d) for d in dims]
        node = below
    rank = dot.shape.rank
    tile = {d: t for d, t in zip(dims, sizes) if d is not None}
    return tile.get(rank - 2, 1), tile.get(rank - 1, 1)


def _dim_map(node: HloInstruction, below: HloInstruction) -> dict | None:
    """Dim of `node` -> dim of `below` holding the same elements (None: dims mix)."""
    if node.opcode == "transpose":
        return {i: d for i, d in enumerate(node.attrs["dimensions"])}
    have = [d for d in reversed(node.shape.minor_to_major) if node.shape.dims[d] != 1]
    want = [d for d in reversed(below.shape.minor_to_major) if below.shape.dims[d] != 1]
    if [node.shape.dims[d] for d in have] != [below.shape.dims[d] for d in want]:
        return None
    return dict(zip(have, want))


def _reaches(node: HloInstruction, target: HloInstruction) -> bool:
    return node is target or any(_reaches(o, target) for o in node.operands)


def padded(size: int) -> int:
    """The tile side the kernel computes with (tl.dot's minimum); the config's tile is masked in it."""
    return max(size, MIN_DOT_TILE)


def shared_memory_bytes(fusion: HloInstruction, config: dict) -> int:
    """What the operand tiles of all pipeline stages take in shared memory (Triton stages the
    loaded tiles, in the parameters' types, before the converts)."""
    dot = next(i for i in fusion.fused_computation().instructions if i.opcode == "dot")
    bm, bn, bk = (padded(config[k]) for k in ("block_m", "block_n", "block_k"))
    lhs = max(PRIMITIVE_TYPES[dot.operands[0].shape.element_type.name].bits // 8, 1)
    rhs = max(PRIMITIVE_TYPES[dot.operands[1].shape.element_type.name].bits // 8, 1)
    return max(config["num_stages"], 1) * (bm * bk * lhs + bk * bn * rhs)


def check_config(fusion: HloInstruction, config: dict, device: DeviceDescription) -> None:
    """One-line HloError naming the fusion for a config the kernel cannot be built with (only
    for fusions of one dot: the others fall back to cuBLAS plus kernels)."""
    if sum(i.opcode == "dot" for i in fusion.fused_computation().instructions) != 1:
        return
    for key in ("block_m", "block_n", "block_k", "num_warps"):
        value = config[key]
        if value < 1 or value & (value - 1):
            raise HloError(f"%{fusion.name}: Triton GEMM config {key}={value} is not a power of two")
    if config["num_stages"] < 1 or config["split_k"] < 1:
        raise HloError(f"%{fusion.name}: Triton GEMM config needs num_stages and split_k of at least 1 "
                       f"(found {config['num_stages']} and {config['split_k']})")
    threads = 32 * config["num_warps"]
    per_thread = padded(config["block_m"]) * padded(config["block_n"]) // threads
    if per_thread > MAX_ACC_PER_THREAD:
        raise HloError(f"%{fusion.name}: Triton GEMM config {config['block_m']}x{config['block_n']} on "
                       f"{config['num_warps']} warps holds {per_thread} accumulator elements per thread; "
                       f"more than 4 times a thread's {REGISTERS} registers")
    need, limit = shared_memory_bytes(fusion, config), device.shared_memory_per_block_optin
    if need > limit:
        raise HloError(f"%{fusion.name}: Triton GEMM config {config['block_m']}x{config['block_n']}x"
                       f"{config['block_k']} with {config['num_stages']} stages needs {need} bytes of shared "
                       f"memory for its tiles; the {device.name} has {limit} per block")


__all__ = ["DEFAULT_CONFIG", "KEYS", "MAX_ACC_PER_THREAD", "MIN_DOT_TILE", "check_config", "fusion_config",
           "padded", "shared_memory_bytes"]
