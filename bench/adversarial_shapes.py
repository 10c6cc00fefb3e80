"""Adversarial module shapes for `bench_pipeline.py --adversarial` (issue 22 item 9): the shapes
where a pass that is linear on transformer stacks can go quadratic.

- `elementwise_chain(n)`: n elementwise ops, each reading the one before (and a parameter), all
  fusible into one loop fusion: priority fusion merges a growing fusion n times.
- `wide_fanout(n)`: one parameter read by n independent elementwise ops, summed pairwise.
- `deep_nesting(depth)`: `depth` computations each calling the next (call, while and conditional
  in turn; a while adds two levels: its body, and the call in it), the parser's nesting limit being
  128 levels. A conditional's other branch is a computation of its own: were both branches the
  same computation at every level, flatten-call-graph would clone it per call site (as XLA's
  FlattenCallGraph does), 2^(depth/3) copies, which is the module's size, not a pass's cost.
"""

from __future__ import annotations

_CHAIN_OPS = ("add({prev}, p1)", "multiply({prev}, {prev})", "negate({prev})", "subtract({prev}, p0)")


def elementwise_chain(n: int, width: int = 1024) -> str:
    lines = [f"HloModule chain_{n}", "", "ENTRY e {", f"  p0 = f32[{width}] parameter(0)",
             f"  p1 = f32[{width}] parameter(1)"]
    prev = "p0"
    for i in range(n):
        lines.append(f"  a{i} = f32[{width}] " + _CHAIN_OPS[i % 4].format(prev=prev))
        prev = f"a{i}"
    lines += [f"  ROOT r = f32[{width}] copy({prev})", "}", ""]
    return "\n".join(lines)


def wide_fanout(n: int, width: int = 1024) -> str:
    lines = [f"HloModule fanout_{n}", "", "ENTRY e {", f"  p0 = f32[{width}] parameter(0)"]
    level = []
    for i in range(n):
        lines.append(f"  v{i} = f32[{width}] {('negate', 'exponential', 'tanh', 'abs')[i % 4]}(p0)")
        level.append(f"v{i}")
    k = 0
    while len(level) > 1:
        nxt = []
        for a, b in zip(level[0::2], level[1::2]):
            lines.append(f"  sum{k} = f32[{width}] add({a}, {b})")
            nxt.append(f"sum{k}")
            k += 1
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    lines += [f"  ROOT r = f32[{width}] copy({level[0]})", "}", ""]
    return "\n".join(lines)


def deep_nesting(depth: int) -> str:
    """Computation c{k} calls c{k+1}; c{depth} negates. Calls, whiles (one trip: the condition
    compares a counter) and conditionals alternate."""
    out = [f"HloModule nest_{depth}", "", f"c{depth} {{", "  p = f32[8] parameter(0)",
           "  ROOT r = f32[8] negate(p)", "}", ""]
    for k in range(depth - 1, -1, -1):
        kind = k % 3
        name = "ENTRY e" if k == 0 else f"c{k}"
        if kind == 0:
            out += [f"{name} {{", "  p = f32[8] parameter(0)",
                    f"  ROOT r = f32[8] call(p), to_apply=c{k + 1}", "}", ""]
        elif kind == 1:
            head = ["  t = (s32[], f32[8]) parameter(0)", "  i = s32[] get-tuple-element(t), index=0"]
            out += [f"w{k}.cond {{", *head,
                    "  one = s32[] constant(1)", "  ROOT lt = pred[] compare(i, one), direction=LT", "}", "",
                    f"w{k}.body {{", *head,
                    "  x = f32[8] get-tuple-element(t), index=1", "  one = s32[] constant(1)",
                    "  j = s32[] add(i, one)", f"  y = f32[8] call(x), to_apply=c{k + 1}",
                    "  ROOT n = (s32[], f32[8]) tuple(j, y)", "}", "",
                    f"{name} {{", "  p = f32[8] parameter(0)", "  z = s32[] constant(0)",
                    "  t = (s32[], f32[8]) tuple(z, p)",
                    f"  w = (s32[], f32[8]) while(t), condition=w{k}.cond, body=w{k}.body",
                    "  ROOT r = f32[8] get-tuple-element(w), index=1", "}", ""]
        else:
            out += [f"other{k} {{", "  p = f32[8] parameter(0)", "  ROOT r = f32[8] abs(p)", "}", "",
                    f"{name} {{", "  p = f32[8] parameter(0)", "  b = pred[] constant(true)",
                    f"  ROOT r = f32[8] conditional(b, p, p), true_computation=c{k + 1}, "
                    f"false_computation=other{k}", "}", ""]
    return "\n".join(out)
