"""The HLO layer: what an HLO module is and how it is read, written and checked.

Types (`dtypes`), shapes and layouts (`shape`), the opcode table (`opcodes`), the IR (`ir`, with
its editing methods in `ir_edit`), attribute and literal values (`attributes`, `literal`,
`strings`), the text parser (`parser` with `parser_scanner`, `parser_attributes`,
`parser_literals`) and canonical printer (`printer`), shape inference (`shape_inference/`), the
verifier (`verifier`), HLO editing and creation utilities (`hlo_utils`, `hlo_creation_utils`) and
XLA's builder math library (`xla_builder_math`). XLA keeps the same things under `xla/hlo/`
(`ir/`, `parser/`, `utils/`, `builder/lib/`) and `xla/service/` (shape inference, verifier).

It is the bottom of hlo_common: it imports nothing of hlo_common but `errors`, and every other
layer builds on it (the contracts are in pyproject.toml, checked by `lint-imports`).
"""
