"""The manifest schema: the one file that carries a compiled module from hlo-codegen to hlo-run.

`manifest` is the document (allocations, kernels, entry signature, integrity digest; reading and
writing it), `thunks` the thunk tree it holds (XLA's `Thunk` kinds as plain data), and
`layout_bytes` the byte format of buffers in it and on the device (arrays in their physical
layout), `json_reader` the checked reading of its JSON. hlo-codegen writes it, hlo-run reads it; it builds on the HLO layer only.
"""
