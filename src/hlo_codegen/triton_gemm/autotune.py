"""Tile configs from an autotune results file, as XLA's `--xla_gpu_load_autotune_results_from`:
XLA's `AutotuneResults` text proto (`xla/autotune_results.proto`, entries under `results`, or
`dots` in older files), each entry a device, the canonical text of a fusion's computation and
an `AutotuneResult` whose `triton` message is a TritonGemmKey (block_m, block_n, block_k,
split_k, num_stages, num_warps, num_ctas).

Where it sits: hlo-codegen, before the compile (`hlo-codegen --xla_gpu_load_autotune_results_from
FILE`): each GEMM fusion whose computation's canonical text and device compute capability match
an entry gets that config as its block-level backend config (the output tile, the dot's block_k,
warps and stages), the tile config the Triton emitter then reads. The key is XLA's
`AutotuneCacheKey` (`xla/service/gpu/autotuning/autotune_cache_key.cc`): the computation printed
canonically (instructions renamed tmp_0, tmp_1, ... in post order, operands with their shapes,
no backend configs or metadata) and the device string, of which the compute capability
(`CUDA: 9.0`) is compared here: the rest names clock and cache sizes XLA measured on the device.
A config with split_k > 1 needs the split-k rewrite of hlo-opt's pipeline and is refused here.
Malformed files are one-line errors naming file:line:col. Not yet shown: that jaxlib 0.10's XLA
takes the entries written here (its entries also carry a cache `version`, 23 in XLA's own test
database `xla/service/gpu/gpu_compiler_test_autotune_db.textproto`; a deviceless XLA compile
given such a file with versions 23 to 30 still reported the fusion's config as not found).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from hlo_common.errors import InputError
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


def load_autotune_results(path: str) -> list[tuple[str, str, dict]]:
    """(device, hlo, TritonGemmKey) of every entry with a Triton result."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read autotune results '{path}': {exc}") from None
    body = parse_textproto(text, path)
    out = []
    for entry in body.get("results", []) + body.get("dots", []):
        if not isinstance(entry, dict):
            raise InputError(f"{path}: a results entry is a message")
        result = (entry.get("result") or [{}])[0]
        triton = (result.get("triton") or [None])[0] if isinstance(result, dict) else None
        if isinstance(triton, dict):
            key = {k: int(v[0]) for k, v in triton.items() if v and str(v[0]).lstrip("-").isdigit()}
            out.append(((entry.get("device") or [""])[0], (entry.get("hlo") or [""])[0], key))
    return out


def apply_autotune_results(module: HloModule, path: str, arch: str) -> int:
    """Set the tile config of every GEMM fusion an entry of the file matches; returns how many."""
    from hlo_common.passes._support import global_computations
    from hlo_common.passes.triton_gemm_fallback import is_triton_gemm_fusion

    cc = arch.removeprefix("sm_").rstrip("af")
    capability = f"CUDA: {cc[:-1]}.{cc[-1]}"
    table = {hlo: key for device, hlo, key in load_autotune_results(path)
             if device.split(",")[0].strip() == capability}
    count = 0
    for comp in global_computations(module):
        for fusion in comp.instructions:
            if is_triton_gemm_fusion(fusion):
                key = table.get(canonical_text(fusion.fused_computation()))
                if key is not None:
                    set_config(fusion, key)
                    count += 1
    return count


def format_entry(device: str, hlo: str, config: dict, seconds: float) -> str:
    """One `results` entry of an AutotuneResults text proto (what `--autotune` writes)."""
    key = " ".join(f"{k}: {config.get(k, 1)}" for k in ("block_m", "block_n", "block_k", "split_k",
                                                         "num_stages", "num_warps"))
    return (f"results {{\n  device: {json.dumps(device)}\n  hlo: {json.dumps(hlo)}\n"
            f"  result {{\n    run_time {{ nanos: {int(seconds * 1e9)} }}\n"
            f"    triton {{ {key} num_ctas: 1 }}\n  }}\n}}\n")


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


__all__ = ["apply_autotune_results", "canonical_text", "format_entry", "load_autotune_results",
           "parse_textproto", "set_config"]
