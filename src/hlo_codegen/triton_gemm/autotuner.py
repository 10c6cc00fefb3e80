"""`hlo-codegen --autotune FILE`: the search of XLA's GemmFusionAutotuner
(`xla/service/gpu/autotuning/gemm_fusion_autotuner.cc`) over the candidates of every GEMM fusion:
the Triton tile configs the device can run and cuBLAS (XLA adds its `CuBlasConfig` when
`xla_gpu_cublas_fallback` is on, its default), each timed, the fastest kept. A Triton winner
becomes the fusion's block-level config; a cuBLAS winner dissolves the fusion (XLA's
RewriteGemmFusionToCall and the call inliner), so its dot compiles to a cuBLAS GemmThunk and the
rest to kernels. Every fusion's winner is written to FILE as XLA's AutotuneResults text proto
(`autotune.format_entry`), which `--xla_gpu_load_autotune_results_from` reads back on a machine
without a GPU and then gives the same compile.

Where it sits: hlo-codegen's CLI, before the compile. The timing is a `Timer`, passed in: on the
cuda platform `autotune_gpu.GpuTimer` (CUDA events; needs a GPU); the tests give a timer of
their own and check the rest of the path (candidates, choice, file, later compile) without one.
Fusions with equal canonical text (XLA's cache key) are timed once and share the winner. Ties
go to the earlier candidate, so the result does not depend on the order of dict or hash.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

from hlo_common.gpu.device import DeviceDescription, device_for_arch
from hlo_common.hlo.ir import HloInstruction, HloModule

from hlo_codegen.triton_gemm.autotune import (CUBLAS, canonical_text, format_entry, gemm_fusions,
                                              keep_on_cublas, set_config, xla_device_key)

# (block_m, block_n, block_k, num_stages, num_warps): a part of XLA's search space for Hopper
# (`xla/backends/gpu/autotuner/triton/dot_search_space.cc` grows it from these sizes)
TRITON_CANDIDATES = [(16, 16, 64, 1, 2), (32, 32, 32, 3, 4), (64, 32, 32, 3, 4), (64, 64, 32, 3, 4),
                     (64, 64, 64, 3, 4), (128, 64, 32, 3, 4), (64, 128, 32, 3, 4), (128, 128, 32, 3, 8),
                     (128, 128, 64, 3, 8), (128, 256, 64, 3, 8), (256, 128, 64, 3, 8)]


class Timer(Protocol):
    """Times candidates; a timer on a GPU also has `device_key(arch)`, that GPU's XLA key string
    (the entries are written under it; without it, under the arch's device spec)."""

    def seconds(self, fusion: HloInstruction, candidates: list, arch: str) -> list[float]:
        """The run time of the fusion with each candidate (a config dict, or CUBLAS)."""


def candidates(fusion: HloInstruction, device: DeviceDescription) -> list:
    """The Triton configs the device can run and the kernel writer takes, then cuBLAS."""
    from hlo_common.errors import HloError

    from hlo_codegen.triton_gemm.config import check_config
    from hlo_codegen.triton_gemm.program import Unsupported
    from hlo_codegen.triton_gemm.source import kernel_source

    out: list = []
    for bm, bn, bk, stages, warps in TRITON_CANDIDATES:
        config = {"block_m": bm, "block_n": bn, "block_k": bk, "split_k": 1, "num_stages": stages,
                  "num_warps": warps}
        try:
            check_config(fusion, config, device)
            kernel_source(fusion, config, "candidate")
        except (HloError, Unsupported, KeyError):
            continue
        out.append(config)
    return out + [CUBLAS]


def choose(fusion: HloInstruction, arch: str, timer: Timer) -> tuple[dict | str, float]:
    """The fastest candidate of the fusion and its time."""
    listed = candidates(fusion, device_for_arch(arch))
    times = timer.seconds(fusion, listed, arch)
    best = min(range(len(listed)), key=lambda k: (times[k], k))
    return listed[best], times[best]


def autotune_module(module: HloModule, arch: str, out_path: str, timer: Timer | None = None) -> dict:
    """Time the candidates of every GEMM fusion, apply the fastest, write the results file
    (whole or not at all). Returns {canonical text: winner}."""
    if timer is None:
        from hlo_codegen.triton_gemm.autotune_gpu import GpuTimer

        timer = GpuTimer()
    key_of = getattr(timer, "device_key", None)
    device_key = key_of(arch) if key_of is not None else xla_device_key(device_for_arch(arch))
    won: dict[str, tuple[dict | str, float]] = {}
    to_cublas: set[int] = set()
    for fusion in gemm_fusions(module):
        hlo = canonical_text(fusion.fused_computation())
        if hlo not in won:
            won[hlo] = choose(fusion, arch, timer)
        choice = won[hlo][0]
        if choice == CUBLAS:
            to_cublas.add(id(fusion))
        else:
            set_config(fusion, choice)
    keep_on_cublas(module, to_cublas)
    # XLA sorts its entries by (device, hlo) (`SortAutotuneResults`, autotuner_cache.cc)
    entries = [format_entry(device_key, hlo, *won[hlo]) for hlo in sorted(won)]
    tmp = Path(f"{out_path}.{os.getpid()}.tmp")
    tmp.write_text("version: 3\n" + "".join(entries))
    os.replace(tmp, out_path)
    return {hlo: choice for hlo, (choice, _) in won.items()}


__all__ = ["TRITON_CANDIDATES", "Timer", "autotune_module", "candidates", "choose"]
