"""What hlo-opt's fusion passes decide with and how they edit (XLA's `gpu_fusible.cc`,
`multi_output_fusion.cc`'s rules, `hlo_fusion_utils`): the legality rules of fusing a producer
into a consumer (`gpu_fusible`), the rules and reachability of multi-output fusion
(`multi_output_fusible`), and the edits that build fusions (`fusion_utils`,
`multi_output_editing`). The passes themselves are in `hlo_opt.passes`; the fusion analysis they
consult is shared with hlo-codegen (`hlo_common.gpu`).
"""
