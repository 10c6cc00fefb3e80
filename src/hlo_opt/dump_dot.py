"""Graphviz dumps (`--dump-format dot`, XLA's `--xla_dump_hlo_as_dot`): one `digraph` per module.

Every computation is drawn once as a cluster. A fusion's computation is nested inside the cluster
of the computation that holds the fusion: the fusion's operands feed the fused parameters and the
fused root feeds the fusion node, whose users read it. Other called computations (while bodies,
branches, reducers, ...) are top-level clusters joined to their caller by a dashed edge labelled
with the attribute (`body`, `to_apply`, ...), so everything reachable is in the picture.

    digraph "m" {
      subgraph "cluster_c0" { label="ENTRY %main"; "n0" [label="p0\\nparameter\\nf32[2]{0}"] ... }
      "n0" -> "n1";
    }
"""

from __future__ import annotations

from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.hlo.opcodes import OPCODES
from hlo_common.hlo.hlo_utils import call_sites_of, computation_callers, fusion_instruction_of

# Fill colour per opcode category (and a few opcodes), in the spirit of XLA's hlo_graph_dumper.
_CATEGORY_COLORS = {
    "elementwise_unary": "#fff3c4", "elementwise_binary": "#fff3c4", "elementwise_ternary": "#fff3c4",
    "data": "#e8eaf6", "reduction": "#c8e6c9", "linalg": "#ffcdd2", "rng": "#f8bbd0",
    "control": "#d1c4e9", "collective": "#b3e5fc", "io": "#ffe0b2",
}
_OPCODE_COLORS = {"parameter": "#ffe0b2", "constant": "#eeeeee", "fusion": "#b2dfdb",
                  "tuple": "#f5f5f5", "get-tuple-element": "#f5f5f5"}


def node_color(instr: HloInstruction) -> str:
    if instr.opcode in _OPCODE_COLORS:
        return _OPCODE_COLORS[instr.opcode]
    op = OPCODES.get(instr.opcode)
    return _CATEGORY_COLORS.get(op.category if op else "", "#ffffff")


def node_label_lines(instr: HloInstruction) -> list[str]:
    """Name, opcode (with fusion kind / parameter number) and shape: what a node shows."""
    head = instr.opcode
    if instr.opcode == "parameter":
        head = f"parameter {instr.parameter_number}"
    elif instr.opcode == "fusion" and instr.attrs.get("kind") is not None:
        head = f"fusion {instr.attrs['kind']}"
    elif instr.opcode == "custom-call" and instr.attrs.get("custom_call_target") is not None:
        head = f"custom-call {instr.attrs['custom_call_target']}"
    shape = str(instr.shape)
    if len(shape) > 60:
        shape = shape[:57] + "..."
    return [instr.name, head, shape]


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


class _DotWriter:
    def __init__(self, module: HloModule):
        self.module = module
        self.callers = computation_callers(module)
        self.node_ids: dict[int, str] = {}
        self.cluster_ids: dict[int, str] = {}
        self.lines: list[str] = []
        self.edges: list[str] = []
        # Fusion computations drawn inside their caller's cluster rather than at the top level.
        self.nested: dict[int, HloComputation] = {}
        for comp in module.computations:
            fusion = fusion_instruction_of(comp, self.callers)
            if fusion is not None:
                self.nested[id(fusion)] = comp

    def node_id(self, instr: HloInstruction) -> str:
        key = id(instr)
        if key not in self.node_ids:
            self.node_ids[key] = f"n{len(self.node_ids)}"
        return self.node_ids[key]

    def render(self) -> str:
        self.lines = [f"digraph {_quote(self.module.name)} {{",
                      "  compound=true;", "  rankdir=TB;",
                      '  node [shape=box, style="rounded,filled", fontname="monospace", fontsize=10];',
                      '  edge [fontname="monospace", fontsize=9];']
        nested_comps = {id(c) for c in self.nested.values()}
        order = [c for c in [self.module.entry] if c is not None] + \
            [c for c in self.module.computations if c is not self.module.entry]
        for comp in order:  # node ids in reading order: entry first
            for instr in comp.instructions:
                self.node_id(instr)
        for comp in order:
            if id(comp) not in nested_comps:
                self.cluster(comp, indent="  ")
        self.lines.extend("  " + e for e in self.edges)
        self.lines.append("}")
        return "\n".join(self.lines) + "\n"

    def cluster(self, comp: HloComputation, indent: str) -> None:
        cid = f"cluster_c{len(self.cluster_ids)}"
        self.cluster_ids[id(comp)] = cid
        label = ("ENTRY %" if comp.is_entry else "%") + comp.name
        self.lines.append(f"{indent}subgraph {_quote(cid)} {{")
        self.lines.append(f"{indent}  label={_quote(label)}; style=rounded; color=\"#90a4ae\";")
        for instr in comp.instructions:
            self.node(instr, indent + "  ")
        self.lines.append(f"{indent}}}")

    def node(self, instr: HloInstruction, indent: str) -> None:
        nid = self.node_id(instr)
        border = ', penwidth=2' if instr.is_root else ''
        self.lines.append(f"{indent}{_quote(nid)} [label={_quote(chr(10).join(node_label_lines(instr)))}, "
                          f"fillcolor={_quote(node_color(instr))}{border}];")
        for op in instr.operands:
            self.edges.append(f"{_quote(self.node_id(op))} -> {_quote(nid)};")
        for pred in instr.control_predecessors:
            self.edges.append(f'{_quote(self.node_id(pred))} -> {_quote(nid)} '
                              '[style=dotted, color="#9e9e9e"];')
        fused = self.nested.get(id(instr))
        if fused is not None:
            self.cluster(fused, indent)
            for param in fused.parameters:
                if param.parameter_number < len(instr.operands):
                    src = self.node_id(instr.operands[param.parameter_number])
                    self.edges.append(f'{_quote(src)} -> {_quote(self.node_id(param))} [style=dashed];')
            self.edges.append(f'{_quote(self.node_id(fused.root))} -> {_quote(nid)} [style=dashed];')
            return
        for site in call_sites_of(instr):
            root = site.computation.root
            if root is None:
                continue
            label = site.key if site.index is None else f"{site.key}[{site.index}]"
            self.edges.append(f'{_quote(self.node_id(root))} -> {_quote(nid)} '
                              f'[style=dashed, color="#7e57c2", label={_quote(label)}];')


def module_to_dot(module: HloModule) -> str:
    """The Graphviz text of `module` (deterministic: ids follow instruction order)."""
    return _DotWriter(module).render()
