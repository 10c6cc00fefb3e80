"""hlo-opt's SPMD partitioner against XLA's, module by module: collectives and the bytes each
device sends (issue 17 item 6; a benchmark, never a test).

    .venv/bin/python bench/spmd_vs_xla.py [-k SUBSTRING] [--no-run]
    .venv/bin/python bench/spmd_vs_xla.py --scale [100,400,1000]

For every `testdata/spmd/<name>.hlo` (made by `testdata/spmd/make_modules.py` from sharded jax
programs) it runs hlo-opt's SPMD passes (Shardy import, sharding propagation, spmd-partitioning,
dce) for the module's device count, counts our collectives and the bytes one device sends in them
(`hlo_common.analysis.collective_traffic`), and prints them beside XLA:CPU's partitioned program
(`testdata/spmd/xla.json`). Unless `--no-run`, it also runs ours on the interpreter's N devices
from the recorded global arguments and says whether every result matches XLA:CPU's. The last
lines give the totals and the goal: no more bytes than XLA's on every module.

`--scale L,...` instead times sharding propagation and the partitioner (issue 17 item 7) on a
stack of L Megatron MLP layers with a data-parallel batch on a 2x4 mesh (9 instructions a layer:
column-parallel dot, tanh, row-parallel dot, scale and residual add), one row per L: instructions,
seconds per pass, and seconds per 1,000 instructions (flat when the time grows linearly).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "helpers"))

from spmd_testlib import DATA, devices_of, partition, run_global  # noqa: E402

from hlo_common.analysis.collective_traffic import collective_traffic  # noqa: E402


def _short(counts: dict[str, int]) -> str:
    names = {"all-reduce": "AR", "all-gather": "AG", "reduce-scatter": "RS", "all-to-all": "A2A",
             "collective-permute": "CP"}
    return " ".join(f"{v}{names[k]}" for k, v in sorted(counts.items())) or "-"


def _matches(module, path: Path, n: int) -> str:
    data = np.load(path.with_suffix(".npz"))
    args = [data[k] for k in sorted((k for k in data.files if k.startswith("arg")), key=lambda k: int(k[3:]))]
    outs = [data[k] for k in sorted((k for k in data.files if k.startswith("out")), key=lambda k: int(k[3:]))]
    got = run_global(module, args, n)
    ok = all(g.shape == e.shape and np.allclose(g, e, rtol=1e-5, atol=1e-5 * max(1.0, float(np.abs(e).max())))
             for g, e in zip(got, outs))
    return "yes" if ok else "NO"


def stack_module(layers: int) -> str:
    """L Megatron MLP layers over a batch split 2 ways and a hidden dim split 4 ways (8 devices)."""
    lines = ["HloModule stack", "", "ENTRY e {",
             "  x = f32[64,256] parameter(0), sharding={devices=[2,1,4]<=[8] last_tile_dim_replicate}"]
    h = "x"
    for i in range(layers):
        lines += [
            f"  w{i}a = f32[256,1024] parameter({2 * i + 1}), "
            "sharding={devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}",
            f"  w{i}b = f32[1024,256] parameter({2 * i + 2}), "
            "sharding={devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}",
            f"  d{i}a = f32[64,1024] dot({h}, w{i}a), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}",
            f"  t{i} = f32[64,1024] tanh(d{i}a)",
            f"  d{i}b = f32[64,256] dot(t{i}, w{i}b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}",
            f"  k{i} = f32[] constant(0.5)",
            f"  b{i} = f32[64,256] broadcast(k{i}), dimensions={{}}",
            f"  m{i} = f32[64,256] multiply(d{i}b, b{i})",
            f"  r{i} = f32[64,256] add(m{i}, {h})"]
        h = f"r{i}"
    lines += [f"  ROOT out = f32[64,256] copy({h}), sharding={{devices=[2,1,4]<=[8] last_tile_dim_replicate}}", "}"]
    return "\n".join(lines) + "\n"


def scale(sizes: list[int]) -> list[tuple[int, float]]:
    """Print one row per stack size; returns (instructions, seconds of both passes) per size."""
    from hlo_common.hlo.parser import parse_module
    from hlo_common.hlo_pass.pass_base import PASS_REGISTRY
    from hlo_opt.passes import load_all_passes

    load_all_passes()
    print(f"{'layers':>6} {'instrs':>7} {'propagation s':>13} {'partitioning s':>14} {'s / 1k instrs':>13}")
    points = []
    for layers in sizes:
        module = parse_module(stack_module(layers), f"stack{layers}")
        module.set_header_attr("num_partitions", "8")
        count = len(module.entry.instructions)
        times = []
        for name in ("sharding-propagation", "spmd-partitioning"):
            start = time.perf_counter()
            PASS_REGISTRY[name]().run(module)
            times.append(time.perf_counter() - start)
        print(f"{layers:>6} {count:>7} {times[0]:>13.2f} {times[1]:>14.2f} {sum(times) / count * 1e3:>13.3f}",
              flush=True)
        points.append((count, sum(times)))
    return points


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", default="", help="only modules whose name contains this")
    parser.add_argument("--no-run", action="store_true", help="skip running ours on the interpreter")
    parser.add_argument("--scale", nargs="?", const="100,400,1000", metavar="L,...",
                        help="time the passes on stacks of L layers instead")
    opts = parser.parse_args()
    if opts.scale:
        scale([int(v) for v in opts.scale.split(",")])
        return
    xla = json.loads((DATA / "xla.json").read_text())
    print(f"{'module':<26} {'N':>2} {'ours':<12} {'XLA':<12} {'ours B':>9} {'XLA B':>9} {'ratio':>6} "
          f"{'match':>5} {'ms':>6}")
    total_ours = total_xla = 0.0
    worse = []
    for path in sorted(DATA.glob("*.hlo")):
        if opts.k not in path.stem:
            continue
        n = devices_of(path)
        start = time.perf_counter()
        module = partition(path.read_text(), n, path.name)
        ms = (time.perf_counter() - start) * 1e3
        counts, sent = collective_traffic(module, 1, n)
        ref = xla[path.stem]
        ratio = sent / ref["bytes_sent"] if ref["bytes_sent"] else (1.0 if sent == 0 else float("inf"))
        match = "-" if opts.no_run else _matches(module, path, n)
        print(f"{path.stem:<26} {n:>2} {_short(counts):<12} {_short(ref['collectives']):<12} {sent:>9.0f} "
              f"{ref['bytes_sent']:>9.0f} {ratio:>6.2f} {match:>5} {ms:>6.1f}")
        total_ours += sent
        total_xla += ref["bytes_sent"]
        if sent > ref["bytes_sent"]:
            worse.append(path.stem)
    print(f"total bytes sent per device: ours {total_ours:.0f}, XLA {total_xla:.0f}")
    print(f"goal (no more bytes than XLA on every module): {'met' if not worse else 'not met on ' + ', '.join(worse)}")


if __name__ == "__main__":
    main()
