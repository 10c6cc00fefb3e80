"""GPU facts that more than one tool needs (XLA's `xla/service/gpu/` and `xla/stream_executor/`).

Device descriptions (`device`), cuBLAS GEMM configurations (`gemm_config`), and the fusion
analysis that hlo-opt's cost model and fusion passes and hlo-codegen's emitters share: which
emitter a fusion gets, its heroes, reduction and transpose shapes and its launch dimensions.
Fusion legality and the cost model are hlo-opt's (`hlo_opt.fusion`, `hlo_opt.gpu_model`); the
emitters are hlo-codegen's. Within hlo_common only this package and the shared passes import it
(the contracts are in pyproject.toml).
"""
