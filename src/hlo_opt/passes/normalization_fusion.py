"""NormalizationFusion ("normalization-fusion"): softmax, log-softmax, layernorm and RMSNorm as one
fusion each, which XLA:GPU only forms through Triton (`SoftmaxRewriterTriton`).

Where it sits: hlo-opt's `fusion` pipeline (src/hlo_opt/pipelines.py), before priority fusion, as
XLA runs its Triton softmax rewriter. The fusions it makes are kCustom with backend_config
`{"fusion_backend_config":{"kind":"__norm"}}`; `hlo_common.gpu.hlo_fusion_analysis` gives them the
"normalization" emitter kind, priority fusion and multi-output fusion leave kCustom fusions alone,
and hlo-codegen emits them with `hlo_codegen.emitters.normalization` (one block, or one warp, per
row; the row stays in registers; reductions through warp shuffles and shared memory). The
recognition of diamonds, row shapes and side inputs is in `hlo_opt.fusion.normalization_diamonds`;
this file decides which groups become fusions, and builds them.

What it recognises (the "diamond" of XLA's rewriter), over full arrays of dims D whose last dim is
the minor one (default layout) and rows of n = D[-1] elements:

    x ... -> reduce(dims={last}) -> row ops -> broadcast back over the last dim -+
    |                                                                             v
    +-------------------- full-shape elementwise ops ---------------------> combine(x', b)

A *row reduction* is a reduce of one full array over its last dimension only, with a scalar
constant init and a one-op reducer (add, multiply, maximum, minimum); its result is broadcast back
(`broadcast(dimensions not naming the last dim)`, through elementwise row ops, reshapes and
bitcasts of row shape) and combined, in a full-shape elementwise op, with a value computed by
full-shape elementwise ops from the same input as the reduce (softmax: max then sum; log-softmax;
layernorm: mean then variance; RMSNorm: mean of squares). Diamonds that share nodes, or whose
input is computed only for the other's ops, become one group (reductions in sequence over the
same rows). Each group then grows:

- upwards: a full-shape elementwise producer all of whose users are in the group (the converts
  that float normalization leaves around bf16 inputs; the subtract of a softmax feeding the sum);
- downwards: while the group's one output has one user, a full-shape elementwise op of it (the
  layernorm scale and bias, the convert back to bf16);
- side inputs: scalar constants and broadcasts (of a constant, of the scale/bias vector) that the
  group reads are cloned in, and so is what such a broadcast reads when it is computed from iotas,
  constants and smaller parameters alone (a causal attention mask: compare(iota, iota); a scale
  vector times 2), at most 16 ops.

A group becomes one fusion if it has exactly one output, of the full shape (no other node is
read outside it), and no path leaves it and comes back (which would make a cycle). Always, a row
must fit one block: n <= MAX_ROW_ELEMENTS (8192: with 1024 threads each thread keeps at most 8
elements of every row value in registers, so no local memory).

A group with several outputs (a backward pass: the forward's mean and rsqrt of the variance feed
the normalized value, its scaled form and the input gradient) becomes one fusion per full-shape
output, recomputing what they share instead of being declined. Each such fusion is the output's
*cone*: the group members it is computed from, grown downwards while its one user outside the
group is a full-shape elementwise op whose other operands come from outside the group or are
cloned side inputs (the "times 2" after the layernorm, the product feeding the scale gradient's
column reduction). The members it shares with other cones or other users are cloned into it; the
original instructions stay for those users and go when none is left. A cone is declined when:

- it holds no reduce (priority fusion makes the loop kernel), or its fusion would read a value
  computed from its own root (a cycle; only the root is replaced, shared members stay);
- recomputing would cost more HBM traffic: a reduce it clones (one read outside the cone, or
  feeding such a value) reads a full-shape input that the cone's root does not read anyway on
  its own path through elementwise ops, broadcasts and row ops (not into reduce operands);
- a reduce it clones is still needed by an output of the group that does not become a fusion
  (a row statistic read outside, a cone declined): those statistics keep a kernel of their own,
  and recomputing them saves nothing (transformer_bwd launched 2 more kernels without this rule).
  Declining one cone can decline others; the pass repeats until the set is stable.

With every cone formed, the shared statistics have no user left and DCE removes them: the
layernorm backward of testdata/fusion/layernorm_grad.hlo becomes three normalization kernels,
each computing mean and variance from x, plus two column reductions, as XLA:GPU's optimized HLO
for it (testdata/fusion/xla/layernorm_grad.hlo) has.

Against XLA's `SoftmaxRewriterTriton` (xla/backends/gpu/transforms/softmax_rewriter_triton.cc),
which declines the same way where it can: a reduce of more than one dimension or not of the
last one, an init that is not a constant, non-default layouts, a broadcast that names the
reduced dimension, a broadcast or reduce with another use, an input not reached through trivial
elementwise ops. Where it differs: XLA declines when its symbolic tiling or the Triton emitter
constraints reject the diamond (rows too long for a tile among them) and, optionally, when its
cost model says the unfused kernels are faster; ours uses the fixed row limit and no cost model.
XLA fuses one diamond per root and lets priority fusion fuse producers and consumers into the
Triton fusion later (its optimized layernorm backward has each Triton fusion recompute the
shared statistics); ours merges the diamonds, grows the group itself and recomputes shared
statistics only under the rules above (priority fusion never fuses into a kCustom fusion here).
Reductions over other dimensions (column reductions), reductions whose result is not broadcast
back, and variadic reduces are left to priority fusion.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_opt.fusion.fusion_utils import FusionEditor
from hlo_opt.fusion.normalization_diamonds import MAX_ROW_ELEMENTS, Group, Rows, diamond, row_reduction_dims
from hlo_common.hlo_pass.pass_base import HloPass, register_pass
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule

NORMALIZATION_KIND = "__norm"


@register_pass
@dataclass
class NormalizationFusion(HloPass):
    """See the module docstring."""

    name = "normalization-fusion"
    max_row_elements: int = MAX_ROW_ELEMENTS
    recompute: bool = True

    def run(self, module: HloModule) -> bool:
        from hlo_opt.passes.priority_fusion import fusible_computations
        editor = FusionEditor(module)
        changed = False
        for comp in fusible_computations(module):
            changed |= self._run_on_computation(comp, editor)
        editor.flush()
        return changed

    def _run_on_computation(self, comp: HloComputation, editor: FusionEditor) -> bool:
        order = comp.post_order()
        position = {id(n): i for i, n in enumerate(order)}
        groups: list[Group] = []
        owner: dict[int, int] = {}
        for instr in order:
            dims = row_reduction_dims(instr)
            if dims is None or dims[-1] > self.max_row_elements or id(instr) in owner:
                continue
            rows = Rows(dims)
            members = diamond(instr, rows)
            if members is None:
                continue
            group = Group(rows, {})
            for m in members:
                group.add(m)
            groups.append(group)
            self._merge_owned(groups, owner, len(groups) - 1)
        for gi, group in enumerate(groups):  # grow all first: growing may merge groups
            if group.members:
                self._grow(group, groups, owner, gi)
        changed = False
        for gi, group in enumerate(groups):
            if not group.members:
                continue
            root = self._single_output(group, comp)
            if root is not None and self._convex(group, comp):
                self._fuse(group, root, comp, editor, position)
                changed = True
            elif self.recompute and len(self._outputs(group)) > 1:
                changed |= self._fuse_recomputing(group, comp, editor, position, owner)
        return changed

    def _fuse_recomputing(self, group: Group, comp: HloComputation, editor: FusionEditor,
                          position: dict[int, int], owner: dict[int, int]) -> bool:
        """A group with several outputs: one fusion per full-shape output (its *cone*, the group
        members it is computed from), cloning what the cones share (see the module docstring).
        A cone is declined when it would make a cycle, when recomputing does not pay, or when a
        reduce it holds is still needed outside the fused cones (by another output of the group,
        which keeps that reduce in a kernel of its own anyway); declining one may decline more.
        The latest root first, so that a root another cone clones is still in place."""
        outputs = self._outputs(group)
        cones: list[tuple[HloInstruction, Group, HloInstruction]] = []
        for out in outputs:
            cone = self._cone(group, out) if group.rows.full(out) else None
            if cone is None:
                continue
            root = self._grow_cone(group, cone, out, owner)
            if self._acyclic(cone, root) and self._recompute_pays(cone, root):
                cones.append((out, cone, root))
        while cones:
            formed = {id(out) for out, _, _ in cones}
            alive: set[int] = set()
            stack = [o for o in outputs if id(o) not in formed]
            while stack:
                node = stack.pop()
                if id(node) in alive:
                    continue
                alive.add(id(node))
                stack.extend(op for op in node.operands if op in group)
            kept = [c for c in cones
                    if not any(n.opcode == "reduce" and id(n) in alive for n in c[1].members.values())]
            if len(kept) == len(cones):
                break
            cones = kept
        cones.sort(key=lambda c: position[id(c[2])], reverse=True)
        changed = False
        for _, cone, root in cones:
            if self._acyclic(cone, root):  # again: the fusions formed so far changed the graph
                self._fuse(cone, root, comp, editor, position)
                changed = True
        return changed

    @staticmethod
    def _acyclic(cone: Group, root: HloInstruction) -> bool:
        """Whether fusing `cone` keeps the graph acyclic when what it shares is cloned: only its
        root is replaced (the other members stay for their other users), so a cycle needs a value
        the fusion reads that is computed from the root."""
        reads = {id(op) for n in cone.members.values() for op in n.operands if op not in cone}
        stack, seen = [root], {id(root)}
        while stack:
            node = stack.pop()
            for user in node.users:
                if id(user) in reads:
                    return False
                if id(user) not in seen:
                    seen.add(id(user))
                    stack.append(user)
        return True

    @staticmethod
    def _cone(group: Group, root: HloInstruction) -> Group | None:
        """The members of `group` that `root` is computed from (through members only), as a group
        of its own; None when it holds no reduce."""
        cone = Group(group.rows, {}, set(group.cloned))
        stack = [root]
        cone.add(root)
        while stack:
            node = stack.pop()
            for op in node.operands:
                if op in group and op not in cone:
                    cone.add(op)
                    stack.append(op)
        if not any(n.opcode == "reduce" for n in cone.members.values()):
            return None
        return cone

    @staticmethod
    def _grow_cone(group: Group, cone: Group, root: HloInstruction,
                   owner: dict[int, int]) -> HloInstruction:
        """Downwards, as `_grow` does for a group: while the root's one user outside the group is a
        full-shape elementwise op of no group whose other operands are scalar constants or
        broadcasts (cloned in) or values from outside the group, that op becomes the root."""
        rows = cone.rows
        while True:
            users = [u for u in root.users if u not in group]
            if len(users) != 1 or root is root.parent.root:
                return root
            user = users[0]
            if (user in cone or not (rows.elementwise(user) and rows.full(user))
                    or owner.get(id(user)) is not None or user is user.parent.root):
                return root
            others = [op for op in user.operands if op is not root]
            if any(op in group and not rows.side_input(op) for op in others):
                return root
            cone.add(user)
            for op in others:
                if rows.side_input(op) and op not in cone:
                    cone.clone_side_input(op)
            root = user

    def _recompute_pays(self, cone: Group, root: HloInstruction) -> bool:
        """Whether recomputing what `cone` shares with other users costs no extra full-array read:
        every reduce the fusion clones (one read outside the cone, or an operand of such a value)
        reads only full-shape inputs that the fusion reads anyway, on the way from its root to
        the values it reads without reducing them."""
        rows = cone.rows
        shared = [n for n in cone.members.values()
                  if n is not root and id(n) not in cone.cloned and not self._duplicable(n)
                  and (n is n.parent.root or any(u not in cone for u in n.users))]
        clones: dict[int, HloInstruction] = {}
        stack = list(shared)
        while stack:
            node = stack.pop()
            if id(node) in clones:
                continue
            clones[id(node)] = node
            stack.extend(op for op in node.operands if op in cone)
        cloned_reduces = [n for n in clones.values() if n.opcode == "reduce"]
        if not cloned_reduces:
            return True

        def full_inputs(starts: list[HloInstruction], through_reduce: bool) -> set[int]:
            found: set[int] = set()
            seen: set[int] = set()
            todo = list(starts)
            while todo:
                node = todo.pop()
                if id(node) in seen:
                    continue
                seen.add(id(node))
                if node not in cone:
                    if rows.full(node):
                        found.add(id(node))
                    continue
                if node.opcode == "reduce" and not through_reduce:
                    continue
                todo.extend(node.operands)
            return found

        anyway = full_inputs([root], through_reduce=False)
        return all(full_inputs([r.operands[0]], through_reduce=True) <= anyway for r in cloned_reduces)

    @staticmethod
    def _merge_owned(groups: list[Group], owner: dict[int, int], gi: int) -> None:
        """Give group `gi` every node it shares with earlier groups (their members move over)."""
        group = groups[gi]
        for key in list(group.members):
            other = owner.get(key)
            if other is not None and other != gi and groups[other].rows.dims == group.rows.dims:
                for k2, n in groups[other].members.items():
                    group.members[k2] = n
                    owner[k2] = gi
                group.cloned |= groups[other].cloned
                groups[other].members = {}
        for key in group.members:
            owner[key] = gi

    def _grow(self, group: Group, groups: list[Group], owner: dict[int, int], gi: int) -> None:
        rows = group.rows
        changed = True
        while changed:
            changed = False
            # upwards: full-shape elementwise producers read only by the group
            for node in list(group.members.values()):
                for op in node.operands:
                    if op in group or not (rows.elementwise(op) and rows.full(op)):
                        continue
                    if op.users and all(u in group for u in op.users) and op is not op.parent.root:
                        other = owner.get(id(op))
                        if other is not None and other != gi:
                            if groups[other].rows.dims != rows.dims:
                                continue
                            for k2, n in groups[other].members.items():
                                group.members[k2] = n
                                owner[k2] = gi
                            group.cloned |= groups[other].cloned
                            groups[other].members = {}
                        group.add(op)
                        owner[id(op)] = gi
                        changed = True
            # downwards: the one output's one full-shape elementwise user
            outputs = self._outputs(group)
            if len(outputs) == 1:
                out = outputs[0]
                users = out.users
                if len(users) == 1 and out is not out.parent.root:
                    user = users[0]
                    if (user not in group and rows.elementwise(user) and rows.full(user)
                            and owner.get(id(user)) is None):
                        group.add(user)
                        owner[id(user)] = gi
                        changed = True
        # side inputs: constants and broadcasts read by the group, and what a broadcast reads when
        # it is computed from iotas and constants alone (an attention mask): cloned in
        for node in list(group.members.values()):
            for op in node.operands:
                if op not in group and rows.side_input(op):
                    group.clone_side_input(op)

    @staticmethod
    def _duplicable(instr: HloInstruction) -> bool:
        return instr.opcode == "constant" or (instr.opcode == "broadcast" and
                                              instr.operands[0].opcode in ("constant", "parameter"))

    def _outputs(self, group: Group) -> list[HloInstruction]:
        out = []
        for node in group.members.values():
            if id(node) in group.cloned or self._duplicable(node):
                continue
            if node is node.parent.root or any(u not in group for u in node.users):
                out.append(node)
        return out

    def _single_output(self, group: Group, comp: HloComputation) -> HloInstruction | None:
        outputs = self._outputs(group)
        if len(outputs) != 1 or not group.rows.full(outputs[0]):
            return None
        if not any(n.opcode == "reduce" for n in group.members.values()):
            return None
        return outputs[0]

    @staticmethod
    def _convex(group: Group, comp: HloComputation) -> bool:
        """No value outside the group is computed from a group node and read by the group."""
        outside = [op for n in group.members.values() for op in n.operands if op not in group]
        memo: dict[int, bool] = {}

        def reaches(node: HloInstruction) -> bool:
            stack, seen = [node], {id(node)}
            while stack:
                cur = stack.pop()
                if memo.get(id(cur)):
                    return True
                for op in cur.operands:
                    if op in group:
                        return True
                    if id(op) not in seen:
                        seen.add(id(op))
                        stack.append(op)
            return False

        for op in outside:
            r = reaches(op)
            memo[id(op)] = r
            if r:
                return False
        return True

    @staticmethod
    def _fuse(group: Group, root: HloInstruction, comp: HloComputation, editor: FusionEditor,
              position: dict[int, int]) -> None:
        fusion = editor.wrap_in_fusion(root, "kCustom")
        fusion.backend_config_data = {"fusion_backend_config": {"kind": NORMALIZATION_KIND}}
        rest = sorted((n for n in group.members.values() if n is not root),
                      key=lambda n: position.get(id(n), -1), reverse=True)
        for node in rest:
            if node in fusion.operands:
                editor.fuse_producer_into_consumer(node, fusion)


__all__ = ["MAX_ROW_ELEMENTS", "NORMALIZATION_KIND", "NormalizationFusion", "row_reduction_dims"]
