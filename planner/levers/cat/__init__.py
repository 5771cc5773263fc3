"""Cat fusion: let producers write straight into their slice of a `torch.cat` output.

`aten.cat.out` copies every input into a fresh buffer. When the inputs sit
back to back inside the output's bytes, in the right order, the copy is a
no-op and the instruction can go. This package decides, on the graph module
memory planning receives (after `ToOutVarPass`), which cats can lose their
copy soundly, and turns each decision into planning constraints:

* FUSED: every input's buffer becomes a member of the output's
  `ContiguousGroup` at its prefix-sum byte offset. A cat whose input is itself
  a fused cat's output nests (the inner output is a member of the outer one).
* ALIASED: the inputs already sit back to back inside one fused region (the
  DenseNet pattern: `cat(x, f1)` is a prefix of `cat(x, f1, f2)`), so the
  output is placed over them.
* PARTIAL (opt-in): the inputs that can move become members; the rest are
  copied into their slice by a stock `clone.out` where the cat stood.

Every other cat is REFUSED with `Refusal` reasons.

Modules, in the order a graph goes through them:
  decisions  the status vocabulary and the per-cat records (reasons: levers.refusals)
  legality   per-cat facts from the graph: may the output and each input move?
  regions    where placed tensors sit inside their root region, and their nesting tree
  grouping   decisions -> groups, widened/shortened lifetimes, clone slots
  analysis   `analyze`: fuse biggest first, then alias; builds a `CatFusion`
  state_reads  cats whose pieces would overwrite a state before its old value's last read
  policy     `plan_with_cat_fusion`: solve with and without, undo fusions that grow the arena
  report     `CatReport`: what fusion bought, for reports and sweeps
  rewrite    `fuse_cats`: after planning, delete the cat instructions from the graph
  lever      `CatFusionLever` and `CatFusionOptions`: the lever protocol's face
"""
