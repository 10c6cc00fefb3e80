"""Dumps: XLA's file names, the step counter, formats (text, dot, html drawn in Chromium), atomicity."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from hlo_common.errors import InputError
from hlo_common.hlo.ir import HloModule
from hlo_common.hlo.parser import parse_module
from hlo_common.hlo.printer import print_module
from hlo_opt.dump import DumpOptions, ModuleDumper, prepare_dump_directory, sanitize_file_name
from hlo_opt.dump_dot import module_to_dot
from hlo_opt.dump_html import module_graph, module_to_html
from hlo_common.hlo_pass.pass_base import HloPass
from hlo_common.hlo_pass.pipeline import HloPassPipeline, RunOptions

TEXT = """
HloModule jit_f
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
fused {
  fp = f32[4] parameter(0)
  fq = f32[4] parameter(1)
  fe = f32[4] exponential(fp)
  ROOT fm = f32[4] multiply(fe, fq)
}
cond {
  cp = (s32[], f32[4]) parameter(0)
  ci = s32[] get-tuple-element(cp), index=0
  lim = s32[] constant(3)
  ROOT lt = pred[] compare(ci, lim), direction=LT
}
body {
  bp = (s32[], f32[4]) parameter(0)
  bi = s32[] get-tuple-element(bp), index=0
  bv = f32[4] get-tuple-element(bp), index=1
  one = s32[] constant(1)
  ni = s32[] add(bi, one)
  nv = f32[4] fusion(bv, bv), kind=kLoop, calls=fused
  ROOT bt = (s32[], f32[4]) tuple(ni, nv)
}
ENTRY main {
  p = f32[4] parameter(0)
  z = s32[] constant(0)
  init = (s32[], f32[4]) tuple(z, p)
  w = (s32[], f32[4]) while(init), condition=cond, body=body
  g = f32[4] get-tuple-element(w), index=1
  zero = f32[] constant(0)
  ROOT r = f32[] reduce(g, zero), dimensions={0}, to_apply=add
}
"""


def module() -> HloModule:
    return parse_module(TEXT, "<test>")


class Toggle(HloPass):
    """Reports a change (without making one) when `changes` is set; named as given."""

    def __init__(self, name: str, changes: bool):
        self.name = name
        self.changes = changes

    def run(self, module: HloModule) -> bool:
        return self.changes


def dump_names(tmp_path: Path, pass_re: str, formats=("text",)) -> list[str]:
    opts = DumpOptions(tmp_path, pass_re, formats)
    dumper = ModuleDumper(opts, 3, "jit_f")
    pipeline = HloPassPipeline("simplification", [Toggle("a", True), Toggle("b", False), Toggle("c", True)])
    pipeline.run_with(module(), RunOptions(dumper=dumper))
    return sorted(p.name for p in tmp_path.iterdir())


def test_with_dot_star_only_changing_passes_and_the_pipeline_start_are_dumped(tmp_path):
    assert dump_names(tmp_path, ".*") == [
        "module_0003.jit_f.0000.simplification.after_pipeline-start.before_a.txt",
        "module_0003.jit_f.0001.simplification.after_a.before_b.txt",
        "module_0003.jit_f.0002.simplification.after_c.before_pipeline-end.txt",
    ]


def test_a_specific_regex_dumps_around_the_matching_pass_changed_or_not(tmp_path):
    # XLA: a dump is due when the pass before or after the point matches (and, for .*, changed).
    assert dump_names(tmp_path, "^b$") == [
        "module_0003.jit_f.0000.simplification.after_a.before_b.txt",
        "module_0003.jit_f.0001.simplification.after_b.before_c.txt",
    ]


def test_every_format_gets_its_own_file(tmp_path):
    names = dump_names(tmp_path, "^c$", formats=("text", "dot", "html"))
    stem = "module_0003.jit_f.0000.simplification.after_b.before_c"
    assert [n for n in names if n.startswith(stem)] == [stem + ".dot", stem + ".html", stem + ".txt"]
    assert not [n for n in names if n.startswith(".")], "temporary files left behind"


def test_text_dump_is_the_canonical_module_text(tmp_path):
    m = module()
    dumper = ModuleDumper(DumpOptions(tmp_path), 0, m.name)
    [path] = dumper.dump(m, "before_optimizations")
    assert path.name == "module_0000.jit_f.before_optimizations.txt"
    assert path.read_text() == print_module(m)


def test_file_names_are_sanitized_and_long_module_names_dropped(tmp_path):
    assert sanitize_file_name("module_0000.m.0001.layout assignment.after_x.before_y.txt") == \
        "module_0000.m.0001.layout_assignment.after_x.before_y.txt"
    dumper = ModuleDumper(DumpOptions(tmp_path), 1, "n" * 300)
    assert dumper.file_name("after_optimizations", "text") == "module_0001.after_optimizations.txt"


def test_an_unwritable_dump_directory_is_an_input_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(InputError, match=r"cannot write dumps to '.*file/sub'"):
        prepare_dump_directory(blocker / "sub")
    prepare_dump_directory(tmp_path / "new" / "dir")
    assert (tmp_path / "new" / "dir").is_dir() and not list((tmp_path / "new" / "dir").iterdir())


def test_bad_dump_options():
    with pytest.raises(InputError, match="invalid --dump-pass-re"):
        DumpOptions(Path("."), "(")
    with pytest.raises(InputError, match="unknown dump format"):
        DumpOptions(Path("."), None, ("svg",))


# -- dot ---------------------------------------------------------------------------------------
def _dot_structure(text: str):
    nodes = re.findall(r'^\s*"(n\d+)" \[label=', text, re.M)
    edges = re.findall(r'^\s*"(n\d+)" -> "(n\d+)"', text, re.M)
    clusters = re.findall(r'subgraph "(cluster_c\d+)" \{\n\s*label="([^"]*)"', text)
    return nodes, edges, clusters


def test_dot_draws_every_instruction_once_with_nested_fusion_clusters():
    m = module()
    text = module_to_dot(m)
    assert text.startswith('digraph "jit_f" {') and text.endswith("}\n")
    assert text.count("{") == text.count("}")
    nodes, edges, clusters = _dot_structure(text)
    assert len(nodes) == len(set(nodes)) == m.instruction_count()
    assert {a for e in edges for a in e} <= set(nodes)
    assert [label for _, label in clusters] == ["ENTRY %main", "%add", "%cond", "%body", "%fused"]
    # The fusion's computation is drawn inside the cluster of the computation holding the fusion.
    body_start = text.index('label="%body"')
    fused_start = text.index('label="%fused"')
    depth = text[body_start:fused_start].count("{") - text[body_start:fused_start].count("}")
    assert depth >= 1
    assert 'label="body"' in text and 'label="condition"' in text and 'label="to_apply"' in text
    assert module_to_dot(module()) == text  # deterministic


# -- html --------------------------------------------------------------------------------------
def test_html_is_self_contained_and_embeds_the_whole_graph():
    m = module()
    page = module_to_html(m)
    assert page.startswith("<!DOCTYPE html>")
    assert not re.search(r"<(script|link|img|iframe)[^>]*\b(src|href)=", page)
    assert "https://" not in page
    raw = re.search(r'<script id="graph-data" type="application/json">(.*?)</script>', page, re.S).group(1)
    data = json.loads(raw)
    assert data == json.loads(json.dumps(module_graph(m)))
    assert sum(len(c["nodes"]) for c in data["computations"]) == m.instruction_count()
    assert module_to_html(module()) == page


def test_html_escapes_script_breaking_text():
    m = parse_module('HloModule m\nENTRY e {\n'
                     '  ROOT c = f32[] custom-call(), custom_call_target="</script><b>"\n}\n')
    page = module_to_html(m)
    assert "</script><b>" not in page
    assert page.count("</script>") == 2


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or \
    ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium not installed (apt-get install -y chromium)")
def test_html_page_draws_the_graph_in_headless_chromium(tmp_path):
    m = module()
    page = tmp_path / "module.html"
    page.write_text(module_to_html(m))
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120)
    dom = proc.stdout
    assert proc.returncode == 0, proc.stderr[-2000:]
    nodes = re.findall(r'<g class="node( root)?" data-name="([^"]+)"', dom)
    assert len(nodes) == m.instruction_count()
    assert {name for _, name in nodes} == {i.name for c in m.computations for i in c.instructions}
    assert sum(1 for root, _ in nodes if root) == len(m.computations)
    assert dom.count("<svg") == len(m.computations)
    assert dom.count('class="edge"') == sum(len(i.operands) for c in m.computations for i in c.instructions)
    assert f'data-drawn="{m.instruction_count()}"' in dom
