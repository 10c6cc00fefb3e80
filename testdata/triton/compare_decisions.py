"""Compare hlo-opt's GEMM decisions with XLA:GPU's (the checked-in `*.xla_gpu.hlo`, or modules of
XLA's corpus compiled with testdata/xla_gpu_compile.py).

    python testdata/triton/compare_decisions.py [--xla-dir DIR] [MODULE.hlo ...]   (default: here)

Each optimized module is reduced to one record per dot that reaches a kernel: "triton" (a kCustom
fusion of kind __triton_gemm / __triton_nested_gemm_fusion) with the opcodes fused around the dot
(bitcasts, reshapes, parameters and constants left out: they are layout and naming), or "cublas"
(a __cublas$gemm / __cublas$lt$matmul call) or "loop" (a dot inside another fusion), each with
the dot's non-batch M, N, K and its batch count, the K split out as batch by split-k folded back
in. Prints one line per module, and "N of M equal" (decisions: triton/cublas/loop per dot;
contents: also the fused opcodes); --split-k also compares the split factors.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
GEMM_KINDS = ("__triton_gemm", "__triton_nested_gemm_fusion")
CUBLAS = ("__cublas$gemm", "__cublas$lt$matmul")
IGNORED = {"parameter", "bitcast", "reshape", "constant", "dot", "transpose", "copy"}


def _kind(instr) -> str | None:
    data = instr.backend_config_data
    if isinstance(data, dict) and isinstance(data.get("fusion_backend_config"), dict):
        return data["fusion_backend_config"].get("kind")
    return None


def _mnk(dot) -> tuple[int, int, int, int]:
    """(batch, M, N, K) of a dot or gemm custom call: batch folds the split-k dim in."""
    from hlo_opt.matmul_utils import dot_dims

    lhs, rhs = dot.operands[:2]
    if dot.opcode == "custom-call":
        ddn = dot.backend_config_data["gemm_backend_config"]["dot_dimension_numbers"]
        lb, lc, rb, rc = (tuple(int(d) for d in ddn.get(f"{side}_{kind}_dimensions", ()))
                          for side, kind in (("lhs", "batch"), ("lhs", "contracting"),
                                             ("rhs", "batch"), ("rhs", "contracting")))
    else:
        lb, lc = dot_dims(dot, "lhs_batch_dims"), dot_dims(dot, "lhs_contracting_dims")
        rb, rc = dot_dims(dot, "rhs_batch_dims"), dot_dims(dot, "rhs_contracting_dims")
    b = math.prod(lhs.shape.dims[d] for d in lb)
    m = math.prod(s for d, s in enumerate(lhs.shape.dims) if d not in lb and d not in lc)
    n = math.prod(s for d, s in enumerate(rhs.shape.dims) if d not in rb and d not in rc)
    k = math.prod(lhs.shape.dims[d] for d in lc)
    return b, min(m, n), max(m, n), k


def _fusion_bodies(module) -> dict[int, str | None]:
    """id(fused computation) -> the backend kind of the fusion calling it."""
    return {id(i.fused_computation()): _kind(i) for c in module.computations for i in c.instructions
            if i.opcode == "fusion"}


def records(module, with_split: bool = False) -> list[tuple]:
    """One (backend, M, N, batch x K, fused opcodes[, batch]) per dot of a parsed module, sorted."""
    bodies = _fusion_bodies(module)
    found = []
    for comp in module.computations:
        for instr in comp.instructions:
            if instr.opcode == "fusion" and _kind(instr) in GEMM_KINDS:
                body = instr.fused_computation()
                dot = next(i for i in body.instructions if i.opcode == "dot")
                ops = Counter(i.opcode for i in body.instructions if i.opcode not in IGNORED)
                found.append(("triton", dot, tuple(sorted(ops.items()))))
            elif instr.opcode == "custom-call" and instr.attrs.get("custom_call_target") in CUBLAS:
                found.append(("cublas", instr, ()))
            elif instr.opcode == "dot" and bodies.get(id(comp), "none") not in GEMM_KINDS:
                found.append(("loop", instr, ()))
    out = []
    for backend, dot, ops in found:
        b, m, n, k = _mnk(dot)
        out.append((backend, m, n, b * k, ops) + ((b,) if with_split else ()))
    return sorted(out)


def ours(text: str, name: str, triton_gemm: bool = True):
    from hlo_common.hlo.parser import parse_module
    from hlo_common.hlo_pass.pipeline import RunOptions
    from hlo_opt.pipelines import build_gpu_pipeline

    module = parse_module(text, name)
    build_gpu_pipeline().run_with(module, RunOptions(triton_gemm=triton_gemm))
    return module


def compare(path: Path, xla_path: Path, with_split: bool) -> tuple[list[tuple], list[tuple]]:
    from hlo_common.hlo.parser import parse_module

    theirs = parse_module(xla_path.read_text(), str(xla_path))
    return records(ours(path.read_text(), str(path)), with_split), records(theirs, with_split)


def _xla_path(path: Path, xla_dir: Path | None) -> Path:
    if xla_dir is not None:
        return xla_dir / path.name
    return path.with_name(path.name[:-len(".hlo")] + ".xla_gpu.hlo")


def _decisions(recs: list[tuple]) -> list[tuple]:
    return sorted(r[:4] for r in recs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--xla-dir", type=Path, help="XLA's optimized modules, by the same file names")
    ap.add_argument("--split-k", action="store_true", help="also compare split-k factors")
    ap.add_argument("modules", nargs="*", type=Path)
    opts = ap.parse_args(argv)
    paths = opts.modules or sorted(p for p in HERE.glob("*.hlo") if not p.name.endswith(".xla_gpu.hlo"))
    same_decisions = same_contents = 0
    for path in paths:
        mine, theirs = compare(path, _xla_path(path, opts.xla_dir), opts.split_k)
        dec = _decisions(mine) == _decisions(theirs)
        same_decisions += dec
        same_contents += mine == theirs
        label = "equal    " if mine == theirs else ("decisions" if dec else "DIFFERENT")
        print(f"{label} {path.name}: ours {len(mine)} dots, XLA {len(theirs)}")
        if mine != theirs:
            only = (("ours", sorted(set(mine) - set(theirs))), ("xla ", sorted(set(theirs) - set(mine))))
            for tag, recs in only:
                for rec in recs:
                    print(f"    {tag} {rec}")
    print(f"{same_decisions} of {len(paths)} modules: equal decisions; {same_contents}: equal fusion "
          "contents")
    return 0 if same_decisions == len(paths) else 1


if __name__ == "__main__":
    sys.exit(main())
