"""HTML dumps (`--dump-format html`, XLA's `--xla_dump_hlo_as_html`): one self-contained page per
dump that draws the module's graph in the browser, with no network access.

The page embeds the graph as JSON and a small script (written here, no libraries) that lays out
each computation in layers (an instruction sits one layer below its deepest operand) and draws it
as SVG: one `<g class="node">` per instruction (name, opcode, shape; the full instruction text as
a tooltip), one `<path class="edge">` per operand edge. Computations are sections of the page;
an instruction that calls computations links to them, so every nested computation is reachable.
"""

from __future__ import annotations

import html
import json

from hlo_common.hlo.ir import HloModule
from hlo_common.hlo.printer import print_instruction
from hlo_opt.dump_dot import node_color, node_label_lines
from hlo_common.hlo.hlo_utils import call_sites_of, topological_order


def module_graph(module: HloModule) -> dict:
    """The JSON the page draws: computations (entry first) with nodes in operand-first order."""
    comps = ([module.entry] if module.entry is not None else []) + \
        [c for c in module.computations if c is not module.entry]
    comp_ids = {id(c): f"c{i}" for i, c in enumerate(comps)}
    out = []
    for comp in comps:
        order = topological_order(comp)
        index = {id(i): k for k, i in enumerate(order)}
        nodes = []
        for instr in order:
            calls = [{"key": s.key if s.index is None else f"{s.key}[{s.index}]",
                      "comp": comp_ids[id(s.computation)], "name": s.computation.name}
                     for s in call_sites_of(instr) if id(s.computation) in comp_ids]
            nodes.append({
                "name": instr.name, "label": node_label_lines(instr), "color": node_color(instr),
                "text": print_instruction(instr, print_metadata=False),
                "operands": [index[id(o)] for o in instr.operands if id(o) in index],
                "root": instr is comp.root, "calls": calls,
            })
        out.append({"id": comp_ids[id(comp)], "name": comp.name, "entry": comp is module.entry,
                    "nodes": nodes})
    return {"module": module.name, "computations": out}


def _json_for_script(data: dict) -> str:
    # Inside <script>, "</" would end the element: escape the characters HTML cares about.
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def module_to_html(module: HloModule) -> str:
    """A complete HTML page drawing `module` (deterministic: same module, same bytes)."""
    title = html.escape(f"HLO module {module.name}")
    return (_PAGE.replace("@TITLE@", title)
            .replace("@DATA@", _json_for_script(module_graph(module)))
            .replace("@SCRIPT@", _SCRIPT))


_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>@TITLE@</title>
<style>
  body { font-family: sans-serif; margin: 16px; background: #fafafa; color: #212121; }
  h1 { font-size: 18px; } h2 { font-size: 15px; margin: 20px 0 6px; font-family: monospace; }
  section { background: #fff; border: 1px solid #cfd8dc; border-radius: 6px; padding: 8px;
            margin-bottom: 12px; }
  .canvas { overflow: auto; max-height: 85vh; }
  .node rect { stroke: #546e7a; stroke-width: 1; }
  .node.root rect { stroke-width: 2.5; }
  .node text { font-family: monospace; font-size: 11px; }
  .node .opcode { font-weight: bold; }
  .edge { fill: none; stroke: #78909c; stroke-width: 1.2; }
  a.call text { fill: #5e35b1; text-decoration: underline; }
</style>
</head>
<body>
<h1>@TITLE@</h1>
<p id="summary"></p>
<div id="graph"></div>
<script id="graph-data" type="application/json">@DATA@</script>
<script>
@SCRIPT@
</script>
</body>
</html>
"""

_SCRIPT = r"""
"use strict";
(function () {
  const SVG = "http://www.w3.org/2000/svg";
  const data = JSON.parse(document.getElementById("graph-data").textContent);
  const H = 18, PAD = 8, VGAP = 36, HGAP = 18, CHAR = 6.8;

  function el(tag, attrs, parent) {
    const e = document.createElementNS(SVG, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }

  function layout(nodes) {
    const rank = [], rows = [];
    nodes.forEach(function (n, i) {
      let r = 0;
      n.operands.forEach(function (o) { r = Math.max(r, rank[o] + 1); });
      rank[i] = r;
      (rows[r] = rows[r] || []).push(i);
    });
    const box = nodes.map(function (n) {
      const lines = n.label.length + (n.calls.length ? n.calls.length : 0);
      const chars = Math.max.apply(null, n.label.concat(n.calls.map(function (c) {
        return "-> " + c.key + ": %" + c.name; })).map(function (s) { return s.length; }));
      return { w: chars * CHAR + 2 * PAD, h: lines * H + PAD };
    });
    let width = 0, y = PAD;
    const rowWidths = rows.map(function (row) {
      return row.reduce(function (s, i) { return s + box[i].w + HGAP; }, -HGAP);
    });
    width = Math.max.apply(null, rowWidths.concat([0])) + 2 * PAD;
    rows.forEach(function (row, r) {
      let x = (width - rowWidths[r]) / 2, hmax = 0;
      row.forEach(function (i) {
        box[i].x = x; box[i].y = y; x += box[i].w + HGAP; hmax = Math.max(hmax, box[i].h);
      });
      y += hmax + VGAP;
    });
    return { box: box, width: width, height: y };
  }

  function drawComputation(comp, container) {
    const section = document.createElement("section");
    section.id = comp.id;
    const h2 = document.createElement("h2");
    h2.textContent = (comp.entry ? "ENTRY %" : "%") + comp.name +
      "  (" + comp.nodes.length + " instructions)";
    section.appendChild(h2);
    const canvas = document.createElement("div");
    canvas.className = "canvas";
    section.appendChild(canvas);
    container.appendChild(section);
    const L = layout(comp.nodes);
    const svg = el("svg", { width: L.width, height: L.height, "data-computation": comp.name });
    canvas.appendChild(svg);
    const edges = el("g", { "class": "edges" }, svg);
    comp.nodes.forEach(function (n, i) {
      const b = L.box[i];
      n.operands.forEach(function (o) {
        const a = L.box[o];
        const x1 = a.x + a.w / 2, y1 = a.y + a.h, x2 = b.x + b.w / 2, y2 = b.y, my = (y1 + y2) / 2;
        const d = "M" + x1 + "," + y1 + " C" + x1 + "," + my + " " + x2 + "," + my + " " + x2 + "," + y2;
        el("path", { "class": "edge", d: d }, edges);
      });
    });
    comp.nodes.forEach(function (n, i) {
      const b = L.box[i];
      const g = el("g", { "class": "node" + (n.root ? " root" : ""), "data-name": n.name,
                          transform: "translate(" + b.x + "," + b.y + ")" }, svg);
      el("title", {}, g).textContent = n.text;
      el("rect", { width: b.w, height: b.h, rx: 5, fill: n.color }, g);
      n.label.forEach(function (line, k) {
        const t = el("text", { x: PAD, y: PAD + (k + 0.8) * H, "class": k === 1 ? "opcode" : "" }, g);
        t.textContent = line;
      });
      n.calls.forEach(function (c, k) {
        const a = el("a", { href: "#" + c.comp, "class": "call" }, g);
        const t = el("text", { x: PAD, y: PAD + (n.label.length + k + 0.8) * H }, a);
        t.textContent = "-> " + c.key + ": %" + c.name;
      });
    });
  }

  const container = document.getElementById("graph");
  let total = 0;
  data.computations.forEach(function (c) { total += c.nodes.length; drawComputation(c, container); });
  document.getElementById("summary").textContent =
    data.computations.length + " computations, " + total + " instructions";
  document.body.setAttribute("data-drawn", String(total));
})();
"""
