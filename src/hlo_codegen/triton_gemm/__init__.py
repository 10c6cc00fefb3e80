"""Triton kernels for hlo-opt's Triton GEMM fusions (`__triton_nested_gemm_fusion`, made by its
triton-gemm-rewriter), as XLA:GPU emits them through OpenAI Triton
(`xla/backends/gpu/codegen/triton/fusion_emitter*.cc`).

Where it sits: hlo-codegen. `source.py` writes a fusion as a Triton kernel (Python source: tiled
loads of the dot's operands with the prologue applied to the loaded tiles, `tl.dot` into an f32
(or s32) accumulator over K, the epilogue on the accumulator tile, a masked store);
`compile.py` compiles it with the `triton` package (the optional `.[triton]` extra) for an
arch to PTX and cubin, with no GPU. Not yet wired into the manifest: the cuda target still runs
these fusions with the elemental loop emitter.
"""
