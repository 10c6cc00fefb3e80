"""Triton kernels for hlo-opt's Triton GEMM fusions (`__triton_nested_gemm_fusion`, made by its
triton-gemm-rewriter), as XLA:GPU emits them through OpenAI Triton
(`xla/backends/gpu/codegen/triton/fusion_emitter*.cc`).

Where it sits: hlo-codegen. `program.py` reads a fusion's tiled program (what each program
instance loads, at which offsets, and computes); `source.py` writes it as a Triton kernel (tiled
loads with the prologue converts applied to the loaded tiles, `tl.dot` into an f32 / s32 / f64
accumulator over K, the epilogue on the tile, a masked store); `compile.py` compiles that with
the `triton` package (the optional `.[triton]` extra) for an arch to PTX and cubin, with no GPU;
`tiled_eval.py` runs the same program tile by tile in numpy, which checks the tiling against
the interpreter. `config.py` reads and checks a fusion's tile config, `emitter.py` makes the
cuda target's kernel thunks (the thunk emitter calls it; a fusion the writer does not take falls
back to cuBLAS plus kernels, `hlo_common.passes.triton_gemm_fallback`, as all do without the
`triton` package), `autotune.py` reads and writes XLA's autotune results, `autotuner.py` picks
the fastest of the Triton configs and cuBLAS for `--autotune` and `autotune_gpu.py` times them
on a GPU. The host target runs these fusions with a GemmFusionThunk.
"""
