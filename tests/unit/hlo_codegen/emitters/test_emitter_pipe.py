"""Every hero emitter through the whole codegen pipe - buffer assignment (which decides in-place
outputs), thunks, the manifest - and run by hlo-run's runtime against the interpreter: on the
host always, on a real GPU (cuda platform, marked `gpu`) where one is usable. The GPU run is
what shows races the host's sequential threads cannot: barriers, warp shuffles, init-then-update
orderings, concurrent stores."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from corpus_lib import CORPUS_DIR as CORPUS
from emitter_testlib import assert_close, distinct_indices, entry_arguments, fusion_of
from hlo_codegen.compiler import CompileOptions, compile_module
from hlo_common.interpreter.evaluator import evaluate
from hlo_common.manifest.manifest import load_manifest
from hlo_common.hlo.parser import parse_module
from hlo_common.hlo.printer import print_module

ADD = "add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }\n"
LT = "lt { a = f32[] parameter(0) b = f32[] parameter(1) c = s32[] parameter(2) d = s32[] parameter(3) " \
     "ROOT r = pred[] compare(a, b), direction=LT }\n"

MODULES = {
    "row_reduction": ADD + """ENTRY e { p = f32[300,4096] parameter(0) z = f32[] constant(0)
        ROOT r = f32[300] reduce(p, z), dimensions={1}, to_apply=add }""",
    "full_reduction_and_side_output": ADD + """f { p = f32[1024,1024] parameter(0) z = f32[] constant(0)
          r = f32[] reduce(p, z), dimensions={0,1}, to_apply=add  e = f32[1024,1024] exponential(p)
          ROOT t = (f32[], f32[1024,1024]) tuple(r, e) }
        ENTRY e { p = f32[1024,1024] parameter(0)
          ROOT f = (f32[], f32[1024,1024]) fusion(p), kind=kInput, calls=f }""",
    "column_reduction": ADD + """ENTRY e { p = f32[2000,77] parameter(0) z = f32[] constant(0)
        ROOT r = f32[77] reduce(p, z), dimensions={0}, to_apply=add }""",
    "scatter_copy_then_update": ADD + """ENTRY e { op = f32[1000,8] parameter(0) i = s32[5000,1] parameter(1)
        u = f32[5000,8] parameter(2)
        ROOT s = f32[1000,8] scatter(op, i, u), update_window_dims={1}, inserted_window_dims={0},
          scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add }""",
    "scatter_in_place": ADD + """ENTRY e { p = f32[1000,8] parameter(0) op = f32[1000,8] negate(p)
        i = s32[5000,1] parameter(1) u = f32[5000,8] parameter(2)
        ROOT s = f32[1000,8] scatter(op, i, u), update_window_dims={1}, inserted_window_dims={0},
          scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add }""",
    "sort_rows": LT + """ENTRY e { x = f32[64,1000] parameter(0) i = s32[64,1000] iota(), iota_dimension=1
        ROOT s = (f32[64,1000], s32[64,1000]) sort(x, i), dimensions={1}, to_apply=lt }""",
    "sort_four_f64": """cmp { a = f64[] parameter(0) b = f64[] parameter(1)
          c = f64[] parameter(2) d = f64[] parameter(3)
          e = f64[] parameter(4) f = f64[] parameter(5) g = f64[] parameter(6) h = f64[] parameter(7)
          ROOT r = pred[] compare(a, b), direction=LT }
        ENTRY e { p = f64[2,2048] parameter(0) q = f64[2,2048] parameter(1) r = f64[2,2048] parameter(2)
          s = f64[2,2048] parameter(3)
          ROOT t = (f64[2,2048], f64[2,2048], f64[2,2048], f64[2,2048]) sort(p, q, r, s), dimensions={1},
            to_apply=cmp }""",
    "windows_and_linalg": ADD + """ge { a = f32[] parameter(0) b = f32[] parameter(1)
          ROOT c = pred[] compare(a, b), direction=GE }
        ENTRY e { x = f32[8,32,32,16] parameter(0) k = f32[3,3,16,8] parameter(1) z = f32[] constant(0)
          c = f32[8,16,16,8] convolution(x, k), window={size=3x3 stride=2x2 pad=1_1x1_1},
            dim_labels=b01f_01io->b01f
          w = f32[8,16,16,16] reduce-window(x, z), window={size=1x3x3x1 stride=1x2x2x1 pad=0_0x1_1x1_1x0_0},
            to_apply=add
          g = f32[8,32,32,16] select-and-scatter(x, w, z),
            window={size=1x3x3x1 stride=1x2x2x1 pad=0_0x1_1x1_1x0_0},
            select=ge, scatter=add
          a = s32[64,48] parameter(2) b = s32[48,40] parameter(3)
          d = s32[64,40] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
          ROOT t = (f32[8,16,16,8], f32[8,32,32,16], s32[64,40]) tuple(c, g, d) }""",
    "topk_gather_dus_concat": """ENTRY e { x = f32[16,300] parameter(0) i = s32[50,2] parameter(1)
          t = (f32[16,4], s32[16,4]) topk(x), k=4, largest=true
          v = f32[16,4] get-tuple-element(t), index=0
          g = f32[50,3,5] gather(x, i), offset_dims={1,2}, collapsed_slice_dims={}, start_index_map={0,1},
            index_vector_dim=1, slice_sizes={3,5}
          n = f32[16,300] negate(x) j = s32[] parameter(2)
          u = f32[16,300] dynamic-update-slice(n, v, j, j)
          c = f32[16,308] concatenate(u, v, v), dimensions={1}
          ROOT r = (f32[50,3,5], f32[16,308]) tuple(g, c) }""",
}


def _keep_unique_promises(module, args: list[np.ndarray]) -> None:
    """Entry parameters a `unique_indices=true` scatter reads as indices get distinct values
    (random ones would break the promise; the result is then implementation-defined and a GPU,
    updating in parallel, shows it)."""
    for fusion in module.entry.instructions:
        if fusion.opcode != "fusion":
            continue
        for instr in fusion.fused_computation().instructions:
            indices = instr.operands[(len(instr.operands) - 1) // 2] if instr.opcode == "scatter" else None
            if indices is None or instr.attrs.get("unique_indices") is not True:
                continue
            if indices.opcode != "parameter":
                continue
            source = fusion.operands[indices.parameter_number]
            if source.opcode == "parameter":
                a = args[source.parameter_number]
                args[source.parameter_number] = distinct_indices(instr, a)


def _run(name: str, platform: str, text: str | None = None) -> None:
    from hlo_run.manifest_runtime import ManifestExecutable

    text = text or "HloModule " + name + "\n" + MODULES[name]
    result = compile_module(parse_module(text), CompileOptions(target=platform))
    manifest = load_manifest(result.manifest.to_bytes(), "m.json")
    if platform == "cuda":
        from hlo_run.backends.cuda import CudaDevice
        device = CudaDevice()
    else:
        from hlo_run.backends.host import HostDevice
        device = HostDevice()
    module = parse_module(text)
    args = entry_arguments(module, 0, (-3, 1003))
    _keep_unique_promises(module, args)
    got = ManifestExecutable(manifest, device).run(args)
    want = evaluate(module, args)
    got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
    shapes = [s for _, s in module.entry.root.shape.leaf_shapes()]
    for k, (g, w, s) in enumerate(zip(got, want, shapes)):
        assert_close(np.asarray(g), np.asarray(w), s, None, f"{name} output {k} on {platform}")


def _wrapped(path: Path) -> str:
    """A corpus file holding only a fused computation, as a module whose entry calls it."""
    fusion = fusion_of(path.read_text())
    return print_module(fusion.parent.parent)


EMITTER_FILES = sorted(p.name for pattern in (
    "backends_gpu_codegen_emitters_tests_reduce_*.hlo", "backends_gpu_codegen_emitters_tests_scatter__*.hlo",
    "backends_gpu_codegen_emitters_tests_transpose__*.hlo", "codegen_emitters_tests_concatenate__*.hlo",
    "codegen_emitters_tests_dynamic_update_slice__*.hlo") for p in CORPUS.glob(pattern))


@pytest.mark.gpu
@pytest.mark.parametrize("name", EMITTER_FILES)
def test_xla_emitter_files_on_gpu(name: str) -> None:
    from hlo_run.backends.cuda import CudaBackend

    reason = CudaBackend.unavailable_reason()
    if reason is not None:
        pytest.skip(f"no usable GPU: {reason}")
    _run(name, "cuda", _wrapped(CORPUS / name))


@pytest.mark.parametrize("name", ["row_reduction", "scatter_copy_then_update", "scatter_in_place",
                                  "topk_gather_dus_concat"])
def test_pipe_on_host(name: str) -> None:
    _run(name, "host")


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(MODULES))
def test_pipe_on_gpu(name: str) -> None:
    from hlo_run.backends.cuda import CudaBackend

    reason = CudaBackend.unavailable_reason()
    if reason is not None:
        pytest.skip(f"no usable GPU: {reason}")
    _run(name, "cuda")
