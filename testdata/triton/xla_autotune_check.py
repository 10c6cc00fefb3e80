"""Does XLA:GPU take the autotune results hlo-codegen writes? For each module: hlo-opt's GEMM
fusions for the H100, one results entry per fusion as `hlo-codegen --autotune` writes it
(`hlo_codegen.triton_gemm.autotune.format_entry`, XLA's device string) with a config XLA would
not pick by itself (CONFIG), then XLA's deviceless compile of the same module with
`--xla_gpu_load_autotune_results_from` (testdata/xla_gpu_compile.py in the python that has jax's
CUDA plugin); a fusion of XLA's output whose block-level config has CONFIG's warps, stages and
tile took our entry. Prints one line per module and the totals; docs/tools.md records them.
With `--keys-from-xla` the entries are keyed by the fusions of XLA's own optimized module
(NAME.xla_gpu.hlo, what hlo-codegen compiles when given XLA's output), which separates the file
format from the fusion decisions (hlo-opt's fusions differ from XLA's where XLA splits K).

    .venv/bin/python testdata/triton/xla_autotune_check.py --xla-python /path/to/venv/bin/python \\
        --target h100_sxm.txtpb [MODULE.hlo ...]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CONFIG = {"block_m": 64, "block_n": 32, "block_k": 64, "split_k": 1, "num_stages": 3, "num_warps": 4}
FUSION = re.compile(r'^\s*(?:ROOT )?%(\S+) = .*"kind":"__triton_nested_gemm_fusion".*$', re.M)


def our_entries(hlo_text: str, name: str, optimize: bool = True) -> tuple[int, str]:
    """(number of GEMM fusions, the results file) of hlo-opt's module for the H100 (or, not
    `optimize`, of the module as it is: XLA's own optimized module)."""
    from hlo_codegen.triton_gemm.autotune import canonical_text, format_entry, gemm_fusions, xla_device_key
    from hlo_common.gpu.device import H100
    from hlo_common.hlo.parser import parse_module
    from hlo_common.hlo_pass.pipeline import RunOptions
    from hlo_opt.pipelines import build_gpu_pipeline

    module = parse_module(hlo_text, name)
    if optimize:
        build_gpu_pipeline().run_with(module, RunOptions(device=H100))
    keys = sorted({canonical_text(f.fused_computation()) for f in gemm_fusions(module)})
    entries = "".join(format_entry(xla_device_key(H100), k, CONFIG, 1e-5) for k in keys)
    return len(keys), "version: 3\n" + entries


def xla_configs(xla_python: str, target: str, module: Path, results: Path) -> list[dict] | str:
    """The block-level configs of XLA's Triton GEMM fusions, compiled with `results` loaded."""
    with tempfile.TemporaryDirectory() as out:
        flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_gpu_load_autotune_results_from={results}"
        env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=flags)
        done = subprocess.run([xla_python, str(HERE.parent / "xla_gpu_compile.py"), "--target", target,
                               "--out-dir", out, str(module)], env=env, capture_output=True, text=True)
        produced = Path(out) / module.name
        if done.returncode != 0 or not produced.exists():
            return (done.stderr.strip().splitlines() or ["no output"])[-1][:200]
        text = produced.read_text()
    configs = []
    for match in FUSION.finditer(text):
        backend = json.loads(match.group(0).split("backend_config=", 1)[1])
        configs.append(backend["fusion_backend_config"]["block_level_fusion_config"])
    return configs


def took_ours(config: dict) -> bool:
    tile = [int(s) for s in config["output_tiles"][0]["sizes"]]
    return (int(config["num_warps"]) == CONFIG["num_warps"] and config["num_stages"] == CONFIG["num_stages"]
            and sorted(tile[-2:]) == sorted([CONFIG["block_m"], CONFIG["block_n"]]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--xla-python", required=True, help="a python with jax's CUDA plugin")
    ap.add_argument("--target", required=True, help="GpuTargetConfigProto text file (the H100's)")
    ap.add_argument("--keys-from-xla", action="store_true",
                    help="key the entries by the fusions of XLA's output (NAME.xla_gpu.hlo), not hlo-opt's")
    ap.add_argument("modules", nargs="*")
    opts = ap.parse_args(argv)
    modules = [Path(m) for m in opts.modules] or sorted(p for p in HERE.glob("*.hlo")
                                                        if not p.name.endswith(".xla_gpu.hlo"))
    totals = [0, 0, 0]  # our fusions, XLA's Triton fusions, of those the ones that took our config
    with tempfile.TemporaryDirectory() as tmp:
        for module in modules:
            if opts.keys_from_xla:
                xla = module.with_name(f"{module.stem}.xla_gpu.hlo")
                ours, text = our_entries(xla.read_text(), xla.name, optimize=False)
            else:
                ours, text = our_entries(module.read_text(), module.name)
            results = Path(tmp) / f"{module.stem}.txtpb"  # XLA reads a text proto only by its name
            results.write_text(text)
            configs = xla_configs(opts.xla_python, opts.target, module, results)
            if isinstance(configs, str):
                print(f"{module.stem:24s} XLA failed: {configs}")
                continue
            took = sum(map(took_ours, configs))
            totals = [totals[0] + ours, totals[1] + len(configs), totals[2] + took]
            print(f"{module.stem:24s} ours {ours}  XLA's Triton fusions {len(configs)}  "
                  f"took our config {took}")
    print(f"{'total':24s} ours {totals[0]}  XLA's Triton fusions {totals[1]}  took our config {totals[2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
