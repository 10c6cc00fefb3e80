"""Compare hlo-opt's cuDNN convolution decisions with XLA:GPU's (the checked-in `*.xla_gpu.hlo`).

    python testdata/cudnn/compare_decisions.py [MODULE.hlo ...]     (default: every module here)

For each module, both optimized modules are reduced to one record per `__cudnn$conv*` call:
target, window, dim_labels, feature groups, the operand and result shapes with layouts, the
activation and the two scales of its CudnnConvBackendConfig. The records are compared as sorted
lists (call order and names may differ). Prints one line per module and "N of M equal".
tests/unit/hlo_opt/passes/test_conv_decisions.py asserts the same on every module here.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def call_records(module) -> list[tuple]:
    """The decisions of every cuDNN convolution call of a parsed module, sorted."""
    from hlo_common.interpreter.cudnn_conv import CUDNN_CONV_TARGETS, parse_cudnn_config

    out = []
    for comp in module.computations:
        for instr in comp.instructions:
            target = instr.attrs.get("custom_call_target") if instr.opcode == "custom-call" else None
            if target not in CUDNN_CONV_TARGETS:
                continue
            cfg = parse_cudnn_config(instr)
            out.append((target, str(instr.attrs.get("window")), str(instr.attrs.get("dim_labels")),
                        int(instr.attrs.get("feature_group_count", 1) or 1),
                        tuple(str(op.shape) for op in instr.operands), str(instr.shape),
                        cfg.activation_mode, cfg.conv_result_scale, cfg.side_input_scale))
    return sorted(out)


def ours(text: str, name: str):
    from hlo_common.hlo.parser import parse_module
    from hlo_common.hlo_pass.pipeline import RunOptions
    from hlo_opt.pipelines import build_gpu_pipeline

    module = parse_module(text, name)
    build_gpu_pipeline().run_with(module, RunOptions())
    return module


def xla_refuses(path: Path) -> str | None:
    """XLA:GPU's refusal of a module (its `.xla_gpu.error`: a convolution cuDNN cannot take), or None."""
    err = path.with_name(path.name[:-len(".hlo")] + ".xla_gpu.error")
    return err.read_text().strip() if err.exists() else None


def kept_convolutions(module) -> int:
    return sum(i.opcode == "convolution" for c in module.computations for i in c.instructions)


def compare(path: Path) -> tuple[list[tuple], list[tuple]]:
    """(our records, XLA's records) for one module with an `.xla_gpu.hlo` beside it. Where XLA
    refuses the module (`.xla_gpu.error`), XLA's records are [] and ours must be too, with every
    convolution kept as a convolution of ours (a record ("convolution", N) stands for N of them)."""
    from hlo_common.hlo.parser import parse_module

    mine = ours(path.read_text(), str(path))
    if xla_refuses(path) is not None:
        original = parse_module(path.read_text(), str(path))
        kept = kept_convolutions(mine) == kept_convolutions(original)
        return call_records(mine) + ([] if kept else [("convolution", kept_convolutions(mine))]), []
    xla_path = path.with_name(path.name[:-len(".hlo")] + ".xla_gpu.hlo")
    theirs = parse_module(xla_path.read_text(), str(xla_path))
    return call_records(mine), call_records(theirs)


def modules(args: list[str]) -> list[Path]:
    if args:
        return [Path(a) for a in args]
    return sorted(p for p in HERE.glob("*.hlo") if not p.name.endswith(".xla_gpu.hlo"))


def main(args: list[str]) -> int:
    paths = modules(args)
    equal = 0
    for path in paths:
        mine, theirs = compare(path)
        if mine == theirs:
            equal += 1
            print(f"equal     {path.name}: {len(mine)} calls")
            continue
        print(f"DIFFERENT {path.name}: ours {len(mine)} calls, XLA {len(theirs)}")
        only_ours, only_xla = sorted(set(mine) - set(theirs)), sorted(set(theirs) - set(mine))
        for label, recs in (("ours", only_ours), ("xla ", only_xla)):
            for rec in recs:
                print(f"    {label} {rec}")
    print(f"{equal} of {len(paths)} equal")
    return 0 if equal == len(paths) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
