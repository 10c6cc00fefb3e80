"""Tile configs from an autotune results file, as XLA's `--xla_gpu_load_autotune_results_from`:
XLA's `AutotuneResults` text proto (`xla/autotune_results.proto`, entries under `results`, or
`dots` in older files), each entry a device, the canonical text of a fusion's computation and
an `AutotuneResult`: a `triton` TritonGemmKey (block_m, block_n, block_k, split_k, num_stages,
num_warps, num_ctas) or a `gemm` (cuBLAS won: `algorithm: -1`, XLA's BLAS_GEMM_DEFAULT).

Where it sits: hlo-codegen, before the compile (`hlo-codegen --xla_gpu_load_autotune_results_from
FILE`): each GEMM fusion whose computation's canonical text and device compute capability match
an entry gets that config as its block-level backend config (the output tile, the dot's block_k,
warps and stages), the tile config the Triton emitter then reads; a fusion whose entry is a
`gemm` is dissolved into its instructions (XLA's GemmFusionAutotunerRewriterVisitor turns it into
a call that is inlined, `xla/service/gpu/autotuning/gemm_fusion_autotuner.cc`), so its dot
becomes a cuBLAS GemmThunk and the rest kernels. The key is XLA's `AutotuneCacheKey`
(`xla/service/gpu/autotuning/autotune_cache_key.cc`): the computation printed canonically
(instructions renamed tmp_0, tmp_1, ... in post order, operands with their shapes, no backend
configs or metadata), the device string (`xla_device_key`) and a cache version. XLA compares all
three exactly; here the compute capability (`CUDA: 9.0`) is compared, and an entry naming this
very device string wins over others of the same capability. What XLA takes (docs/tools.md,
checked with jaxlib 0.10.2's deviceless compile): the whole device string, a text-proto file
name (`.txt`, `.txtpb`, `.textproto`, `.pbtxt`; other names are read as binary protos), the file
`version: 3`, and either no entry `version` (XLA fills in its own, 45 there) or its own.
A config with split_k > 1 needs the split-k rewrite of hlo-opt's pipeline and is refused here.
Malformed files are one-line errors naming file:line:col.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from hlo_common.errors import HloError, InputError
from hlo_common.gpu.device import DeviceDescription, device_for_arch
from hlo_common.hlo.ir import COMPUTATION_ATTRS, HloComputation, HloInstruction, HloModule
from hlo_common.hlo.printer import _attribute_strings, constant_text

_TOKEN = re.compile(r'\s*(?:#[^\n]*\n\s*)*'
                    r'(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<punct>[{}:<>])|(?P<word>[^\s{}:<>"#]+))')


def parse_textproto(text: str, name: str) -> dict:
    """A text proto as {field: [values]}, nested messages as dicts (no schema needed here)."""
    pos, stack = 0, [{}]

    def where(at: int) -> str:
        line = text.count("\n", 0, at) + 1
        return f"{name}:{line}:{at - (text.rfind(chr(10), 0, at) + 1) + 1}"

    field = None
    while True:
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos and not text[pos:].strip():
            break
        pos, at = m.end(), m.start(m.lastgroup)
        token = m.group("str") or m.group("punct") or m.group("word")
        if token in ("}", ">"):
            if len(stack) == 1 or field is not None:
                raise InputError(f"{where(at)}: unexpected '{token}'")
            stack.pop()
        elif field is None:
            if m.group("word") is None:
                raise InputError(f"{where(at)}: expected a field name, found {token!r:.30}")
            field = token
        elif token == ":":
            continue
        elif token in ("{", "<"):
            child: dict = {}
            stack[-1].setdefault(field, []).append(child)
            stack.append(child)
            field = None
        else:
            value = _unquote(token) if m.group("str") else token
            stack[-1].setdefault(field, []).append(value)
            field = None
    if len(stack) != 1 or field is not None:
        raise InputError(f"{where(len(text))}: the file ends inside a message")
    return stack[0]


def _unquote(token: str) -> str:
    return token[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")


def canonical_text(comp: HloComputation) -> str:
    """XLA's canonical print of a fused computation (its autotune cache key's `hlo`)."""
    order = comp.post_order()
    names = {id(i): f"tmp_{k}" for k, i in enumerate(order)}
    lines = ["{"]
    for instr in order:
        if instr.opcode == "parameter":
            ops = str(instr.parameter_number)
        elif instr.opcode == "constant":
            ops = constant_text(instr) if _essential(instr) else "{...}"
        else:
            ops = ", ".join(f"{o.shape} {names[id(o)]}" for o in instr.operands)
        attrs = [a for a in _attribute_strings(instr, False) if not a.startswith("backend_config=")
                 and a.split("=")[0] not in COMPUTATION_ATTRS]
        text = f"{names[id(instr)]} = {instr.shape} {instr.opcode}({ops})"
        lines.append(("  ROOT " if instr is comp.root else "  ") + ", ".join([text, *attrs]))
    return "\n".join(lines + ["}"])


def _essential(instr: HloInstruction) -> bool:
    """Integer, all-zero or all-one constants (XLA's `print_only_essential_constants`)."""
    import numpy as np

    value = np.asarray(instr.literal)
    if not instr.shape.element_type.is_float:
        return True
    return bool(np.all(value == 0) or np.all(value == 1) or np.all(np.mod(value, 1) == 0))


CUBLAS = "cublas"  # the result that keeps a fusion's dot on cuBLAS (XLA's `gemm` AutotuneResult)
DNN_VERSION = "9.8.0"  # the cuDNN version in XLA's device specs (xla/backends/gpu/target_config/specs/)


def xla_device_key(device: DeviceDescription, dnn_version: str = DNN_VERSION) -> str:
    """XLA's `DeviceDescriptionToCacheKey`: compute capability, cores, clock, bandwidth in GB/s
    rounded, L2 in MiB and the cuDNN version, numbers printed as absl's StrCat prints doubles."""
    major, minor = device.compute_capability
    return (f"CUDA: {major}.{minor}, Cores: {device.core_count}, GPU clock: {device.clock_rate_ghz:.6g} GHz, "
            f"Memory bandwidth: {round(device.memory_bandwidth / 1e9):.6g} GB/s, "
            f"L2 cache: {device.l2_cache_size / (1 << 20):.6g} MB, DNN version: {dnn_version}")


def load_autotune_results(path: str) -> list[tuple[str, str, dict | str]]:
    """(device, hlo, TritonGemmKey or CUBLAS) of every entry with a Triton or cuBLAS result."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read autotune results '{path}': {exc}") from None
    body = parse_textproto(text, path)
    out: list[tuple[str, str, dict | str]] = []
    for entry in body.get("results", []) + body.get("dots", []):
        if not isinstance(entry, dict):
            raise InputError(f"{path}: a results entry is a message")
        result = (entry.get("result") or [{}])[0]
        result = result if isinstance(result, dict) else {}
        triton = (result.get("triton") or [None])[0]
        choice: dict | str | None = None
        if isinstance(triton, dict):
            choice = {k: int(v[0]) for k, v in triton.items() if v and str(v[0]).lstrip("-").isdigit()}
        elif isinstance((result.get("gemm") or [None])[0], dict):
            choice = CUBLAS
        if choice is not None:
            out.append(((entry.get("device") or [""])[0], (entry.get("hlo") or [""])[0], choice))
    return out


def _table(path: str, arch: str) -> dict[str, dict | str]:
    """hlo -> result of the entries of the arch's compute capability; this device's own string
    first (XLA would take only that one)."""
    mine = xla_device_key(device_for_arch(arch))
    cc = arch.removeprefix("sm_").rstrip("af")
    capability = f"CUDA: {cc[:-1]}.{cc[-1]}"
    entries = [e for e in load_autotune_results(path) if e[0].split(",")[0].strip() == capability]
    table: dict[str, dict | str] = {}
    for _device, hlo, choice in sorted(entries, key=lambda e: e[0] != mine):
        table.setdefault(hlo, choice)
    return table


def apply_autotune_results(module: HloModule, path: str, arch: str) -> int:
    """Set the tile config of every GEMM fusion an entry of the file matches, and dissolve those
    whose entry says cuBLAS; returns how many fusions an entry matched."""
    table = _table(path, arch)
    count, to_cublas = 0, set()
    for fusion in gemm_fusions(module):
        choice = table.get(canonical_text(fusion.fused_computation()))
        if choice is None:
            continue
        count += 1
        if choice == CUBLAS:
            to_cublas.add(id(fusion))
        else:
            _set_checked(fusion, choice, path, arch)
    keep_on_cublas(module, to_cublas)
    return count


def _set_checked(fusion: HloInstruction, key: dict, path: str, arch: str) -> None:
    """set_config, then the device's checks of the config; a refusal names the file and fusion."""
    from hlo_codegen.triton_gemm.config import check_config, fusion_config

    try:
        set_config(fusion, key)
        check_config(fusion, fusion_config(fusion), device_for_arch(arch))
    except HloError as exc:
        raise type(exc)(f"{path}: the entry for {exc}") from None


def gemm_fusions(module: HloModule) -> list[HloInstruction]:
    """The Triton GEMM fusions of the module, in order."""
    from hlo_common.passes._support import global_computations
    from hlo_common.passes.triton_gemm_fallback import is_triton_gemm_fusion

    return [i for comp in global_computations(module) for i in comp.instructions if is_triton_gemm_fusion(i)]


def keep_on_cublas(module: HloModule, fusions: set[int]) -> None:
    """Dissolve the fusions (by id) into their instructions: the dot becomes a cuBLAS call, the
    rest kernels (XLA's RewriteGemmFusionToCall and the call inliner after it)."""
    if fusions:
        from hlo_common.passes.triton_gemm_fallback import TritonGemmFallback

        TritonGemmFallback(lambda fusion: id(fusion) in fusions).run(module)


def format_entry(device: str, hlo: str, choice: dict | str, seconds: float) -> str:
    """One `results` entry of an AutotuneResults text proto (what `--autotune` writes); without
    an entry `version`, which XLA then sets to its own."""
    if choice == CUBLAS:
        body = "gemm { algorithm: -1 }"
    else:
        key = " ".join(f"{k}: {choice.get(k, 1)}" for k in ("block_m", "block_n", "block_k", "split_k",
                                                            "num_stages", "num_warps"))
        body = f"triton {{ {key} num_ctas: 1 }}"
    return (f"results {{\n  device: {json.dumps(device)}\n  hlo: {json.dumps(hlo)}\n"
            f"  result {{\n    run_time {{ nanos: {int(seconds * 1e9)} }}\n    {body}\n  }}\n}}\n")


def set_config(fusion: HloInstruction, key: dict) -> None:
    """Write a TritonGemmKey as the fusion's block-level config (and its dot's block_k)."""
    if key.get("split_k", 1) != 1:
        raise InputError(f"%{fusion.name}: the autotune result has split_k={key['split_k']}; split-k "
                         "rewrites the fusion, which hlo-opt's splitk-rewriter does (hlo-codegen takes 1)")
    root_rank = fusion.shape.rank
    tile = [1] * max(root_rank - 2, 0) + [key.get("block_m", 16), key.get("block_n", 16)]
    data = dict(fusion.backend_config_data) if isinstance(fusion.backend_config_data, dict) else {}
    fbc = dict(data.get("fusion_backend_config") or {})
    fbc.pop("triton_gemm_config", None)
    fbc["kind"] = "__triton_nested_gemm_fusion"
    fbc["block_level_fusion_config"] = {
        "num_warps": str(key.get("num_warps", 4)), "output_tiles": [{"sizes": [str(t) for t in tile]}],
        "num_ctas": key.get("num_ctas", 1), "num_stages": key.get("num_stages", 1), "is_tma_allowed": False}
    data["fusion_backend_config"] = fbc
    fusion.backend_config_data = data
    for instr in fusion.fused_computation().instructions:
        if instr.opcode == "dot":
            instr.backend_config_data = {"sizes": [str(key.get("block_k", 16))]}
    from hlo_codegen.triton_gemm.config import fusion_config

    got = fusion_config(fusion)
    want = (key.get("block_m", 16), key.get("block_n", 16))
    if (got["block_m"], got["block_n"]) != want and root_rank >= 2:
        tile[-2:] = tile[-1], tile[-2]  # the root is a bitcast of the dot that swaps M and N
        fbc["block_level_fusion_config"]["output_tiles"] = [{"sizes": [str(t) for t in tile]}]


__all__ = ["CUBLAS", "DNN_VERSION", "apply_autotune_results", "canonical_text", "format_entry",
           "gemm_fusions", "keep_on_cublas", "load_autotune_results", "parse_textproto", "set_config",
           "xla_device_key"]
