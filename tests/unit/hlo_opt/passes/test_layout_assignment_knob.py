"""layout-assignment's test knob `vary_layouts_seed` (the layout tier's variants): off by default;
on, every dot's result takes another layout cuBLAS can write and every convolution a cuDNN
layout triple, seeded by the instruction's name; layouts stay consistent and values unchanged."""

from __future__ import annotations

import os
import subprocess
import sys

from layout_testlib import run_layout_pass

from hlo_common.hlo.parser import parse_module
from hlo_opt.passes.layout_assignment import GpuLayoutAssignment, cudnn_conv_layouts, supported_dot_layouts
from hlo_opt.pipelines import build_gpu_pipeline

MODULE = """HloModule knob
ENTRY e {
  a = f32[4,8,16] parameter(0)
  b = f32[4,16,6] parameter(1)
  bd = f32[4,8,6] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0},
    rhs_contracting_dims={1}
  x = f32[8,16] parameter(2)
  y = f32[16,5] parameter(3)
  d = f32[8,5] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  img = f32[2,6,6,3] parameter(4)
  k = f32[3,3,3,4] parameter(5)
  c = f32[2,6,6,4] convolution(img, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  ROOT t = (f32[4,8,6], f32[8,5], f32[2,6,6,4]) tuple(bd, d, c)
}
"""


def layouts(module) -> dict[str, tuple]:
    return {i.name: i.shape.minor_to_major for i in module.entry.instructions
            if i.opcode in ("dot", "convolution")}


def test_off_by_default_everywhere_the_pipeline_runs_it():
    assert GpuLayoutAssignment().vary_layouts_seed is None
    passes = [p for pipe in build_gpu_pipeline().pipelines for p in getattr(pipe, "passes", ())
              if getattr(p, "name", "") == "layout-assignment"]
    assert passes and all(p.vary_layouts_seed is None for p in passes)
    on = [p for pipe in build_gpu_pipeline({"layout-assignment": {"vary_layouts_seed": 5}}).pipelines
          for p in getattr(pipe, "passes", ()) if getattr(p, "name", "") == "layout-assignment"]
    assert [p.vary_layouts_seed for p in on] == [5]
    plain = layouts(run_layout_pass("layout-assignment", MODULE, changed=False))
    assert plain == {"bd": (2, 1, 0), "d": (1, 0), "c": (3, 2, 1, 0)}


def test_supported_dot_layouts_are_xlas_matrix_layouts():
    module = parse_module(MODULE)
    bd, d = (i for i in module.entry.instructions if i.opcode == "dot")
    # (B,R,C) (B,C,R) (R,B,C) (C,B,R) major to minor; never the batch most minor
    assert sorted(supported_dot_layouts(bd)) == sorted([(2, 1, 0), (1, 2, 0), (2, 0, 1), (1, 0, 2)])
    assert sorted(supported_dot_layouts(d)) == [(0, 1), (1, 0)]
    (conv,) = (i for i in module.entry.instructions if i.opcode == "convolution")
    assert cudnn_conv_layouts(conv, nhwc=True) == ((3, 2, 1, 0), (2, 1, 0, 3), (3, 2, 1, 0))
    assert cudnn_conv_layouts(conv, nhwc=False) == ((2, 1, 3, 0), (1, 0, 2, 3), (2, 1, 3, 0))


def test_each_seed_moves_every_dot_and_convolution_and_keeps_values():
    seen: dict[str, set] = {"bd": set(), "d": set(), "c": set()}
    module = parse_module(MODULE)
    allowed = {i.name: set(supported_dot_layouts(i)) for i in module.entry.instructions if i.opcode == "dot"}
    conv = next(i for i in module.entry.instructions if i.opcode == "convolution")
    allowed["c"] = {cudnn_conv_layouts(conv, nhwc)[2] for nhwc in (True, False)}
    for seed in range(6):
        got = layouts(run_layout_pass("layout-assignment", MODULE, vary_layouts_seed=seed))
        for name, m2m in got.items():
            assert m2m in allowed[name], (seed, name, m2m)
            seen[name].add(m2m)
        assert got["bd"] != (2, 1, 0) and got["d"] == (0, 1)  # never the default for a dot
    assert len(seen["bd"]) >= 2 and len(seen["c"]) == 2


def test_the_choice_does_not_depend_on_the_hash_seed():
    code = ("import sys; sys.path[:0] = %r\n"
            "from layout_testlib import run_layout_pass\n"
            "from test_layout_assignment_knob import MODULE, layouts\n"
            "print(layouts(run_layout_pass('layout-assignment', MODULE, vary_layouts_seed=3)))") % (sys.path,)
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env=dict(os.environ, PYTHONHASHSEED=h), cwd=os.path.dirname(__file__)).stdout
            for h in ("0", "123")}
    assert len(outs) == 1 and "bd" in outs.pop()
