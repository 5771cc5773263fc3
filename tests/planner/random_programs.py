"""Random stateful programs, to check state in place and cat fusion against eager PyTorch.

`generate(seed)` writes the source of a small program over mutable buffers
(`st.s0`, `st.s1`, ... in a shared `Store`): rows read before and after their
updates, cats, slices and stacks of state and of fresh values, ring
rotations, counters, dtype round trips, slice writes, one or two methods.
Two shapes are woven in by a second random stream, so the programs that
stream leaves alone are the ones earlier versions wrote for the same seed:
a new value named before the old state is read (its write-back moves) and
read at the end through a view (issue 31, item 10), and a cat input named,
sliced before the cat and the slice read at the end (item 11).
The source is the program's identity: a failure prints it, and a finding
can be pasted into a test as it is. `RandomProgram.model()` builds the
`ZooModel` (initial state serialized with `InitializedMutableBufferPass`,
calls with fresh inputs) that `experiments.runtime` lowers and checks;
`check(program)` runs it with stock planning and with every lever
combination (`LEVERS`) against eager. `tests/test_random_state_programs.py`
runs a few by default and many under `-m slow`; run as a script, this file
prints the table (programs, lever combinations, runs, mismatches):

    .venv/bin/python tests/planner/random_programs.py --seeds 0:100
    .venv/bin/python tests/planner/random_programs.py --seeds 0:300 --slice-noop-only  # every lever on
"""

from __future__ import annotations

import argparse
import itertools
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import product

import torch
from executorch.exir.banked_memory_planning import Bank, TargetMemoryMap
from executorch.exir.passes.init_mutable_pass import InitializedMutableBufferPass
from torch import nn

from memplan.experiments.zoo import ZooModel, runtime
from memplan.planner.pass_ import PlannerPass

WIDTH = 4  # every row state and row value has this many columns
INPUT_ROWS = 8  # x: [INPUT_ROWS, WIDTH]
N_CALLS = 6
SOLVERS = ("cpsat", "bestfit")  # the default solver and another


@dataclass(frozen=True)
class State:
    """A mutable buffer: `rows` x WIDTH floats, a [2, 4, WIDTH] stack, or an int64 counter."""

    name: str
    kind: str  # "rows", "stack" or "counter"
    rows: int = 0

    def init_source(self) -> str:
        if self.kind == "counter":
            return "torch.tensor([1], dtype=torch.int64)"
        shape = (self.rows, WIDTH) if self.kind == "rows" else (2, 4, WIDTH)
        n = shape[0] * shape[1] * (shape[2] if len(shape) > 2 else 1)
        return f"torch.linspace(-1.0, 1.0, {n}).reshape{shape}"


@dataclass(frozen=True)
class Levers:
    cat_fusion: bool
    state_in_place: bool
    solver: str
    cat_fusion_partial: bool = False  # inputs that cannot move are cloned into their slot
    slice_noop: bool = False  # slices/selects/splits placed inside their input, the copy removed
    memory_map: bool = False  # a 64-byte sram and a roomy dram: tensors split across two banks
    elementwise_in_place: bool = False  # an elementwise op's output written over an input it reads last

    def planner(self) -> PlannerPass:
        return PlannerPass(
            solver=self.solver,
            cat_fusion=self.cat_fusion,
            state_in_place=self.state_in_place,
            cat_fusion_partial=self.cat_fusion_partial,
            slice_noop=self.slice_noop,
            elementwise_in_place=self.elementwise_in_place,
            memory_map=TargetMemoryMap([Bank("sram", 64, 1), Bank("dram", 1 << 20, 2)])
            if self.memory_map
            else None,
        )

    def __str__(self) -> str:
        partial = ", partial" if self.cat_fusion_partial else ""
        noop = ", slice_noop" if self.slice_noop else ""
        banks = ", two banks" if self.memory_map else ""
        noop += ", elementwise_in_place" if self.elementwise_in_place else ""
        levers = f"cat_fusion={self.cat_fusion}{partial}, state_in_place={self.state_in_place}{noop}{banks}"
        return f"{self.solver}, {levers}"


# Every cat_fusion x state_in_place combination under each solver, PARTIAL fusion (clones into the
# state's slots) with the state in place, and every lever on at once (slice no-ops too; with PARTIAL
# fusion as well), then with a memory map as well (the BankedGreedy reference may be kept over the
# levers' plan), and every lever with elementwise outputs written over their inputs as well.
LEVERS = tuple(Levers(c, s, solver) for solver, c, s in product(SOLVERS, (True, False), (True, False))) + (
    Levers(True, True, SOLVERS[1], cat_fusion_partial=True),
    Levers(True, True, SOLVERS[0], slice_noop=True),
    Levers(True, True, SOLVERS[0], cat_fusion_partial=True, slice_noop=True),
    Levers(True, True, SOLVERS[0], slice_noop=True, memory_map=True),
    Levers(True, True, SOLVERS[0], cat_fusion_partial=True, slice_noop=True, elementwise_in_place=True),
)


@dataclass(frozen=True)
class RandomProgram:
    seed: int
    states: tuple[State, ...]
    methods: tuple[str, ...]
    source: str  # the Store and one module class per method
    calls: tuple[str, ...]  # method of each call, in order

    def model(self) -> ZooModel:
        """The program as a ZooModel: one module per method sharing one Store, fresh inputs per call."""
        scope: dict[str, object] = {"torch": torch, "nn": nn}
        exec(compile(self.source, f"<random program {self.seed}>", "exec"), scope)
        store = scope["Store"]()  # type: ignore[operator]
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            inputs = [(torch.randn(INPUT_ROWS, WIDTH),) for _ in self.calls]
        modules = {m: scope[_class_name(m)](store).eval() for m in self.methods}  # type: ignore[operator]
        first = {m: next(x for c, x in zip(self.calls, inputs) if c == m) for m in self.methods}
        several = len(self.methods) > 1
        return ZooModel(
            f"random_{self.seed}",
            f"random stateful program {self.seed}",
            {m: (modules[m], first[m]) for m in self.methods},
            list(zip(self.calls, inputs)),
            backend_config={
                "passes": [InitializedMutableBufferPass([f"store_{s.name}" for s in self.states])]
            },
            memory_planning_config={"share_mutable_buffers": True} if several else {},
            shared_state=several,
            convert_to_linear=False,
            atol=1e-3,
            rtol=1e-3,
        )


def _class_name(method: str) -> str:
    return f"Method_{method}"


def generate(seed: int) -> RandomProgram:
    """The program of `seed` (the same source for the same seed)."""
    rng = random.Random(seed)
    shapes = random.Random(f"shapes {seed}")  # the woven-in shapes: `rng`'s draws stay as they were
    states = [State("s0", "rows", rng.choice((4, 6, 8)))]
    for i in range(1, rng.choice((1, 2, 3, 3))):
        kind = rng.choice(("rows", "rows", "stack", "counter"))
        states.append(State(f"s{i}", kind, rng.choice((4, 6, 8)) if kind == "rows" else 0))
    methods = ("forward",) if rng.random() < 0.7 else ("forward", "step")
    lines = ["class Store(nn.Module):", "    def __init__(self):", "        super().__init__()"]
    lines += [f'        self.register_buffer("{s.name}", {s.init_source()})' for s in states]
    for method in methods:
        lines += ["", "", f"class {_class_name(method)}(nn.Module):"]
        lines += [
            "    def __init__(self, store):",
            "        super().__init__()",
            "        self.store = store",
        ]
        lines += ["", "    def forward(self, x):", "        st = self.store"]
        lines += ["        " + line for line in _Body(rng, states, shapes).lines()]
    calls = list(methods) + [rng.choice(methods) for _ in range(N_CALLS - len(methods))]
    return RandomProgram(seed, tuple(states), methods, "\n".join(lines) + "\n", tuple(calls))


MOVED_SHARE = 0.3  # of the write-backs that can move: the new value named, the old state read after it
HELD_SHARE = 0.3  # of the cats' first inputs: named, and a slice of it read after the cat


class _Body:
    """One method's statements: values, state updates and reads in random order, then the return.

    `shapes` draws the woven-in shapes (`written_back`, `held_across_cat`); `rng` everything else.
    """

    def __init__(self, rng: random.Random, states: list[State], shapes: random.Random) -> None:
        self.rng = rng
        self.states = states
        self.shapes = shapes
        self.names = itertools.count()  # numbers the woven-in variables
        self.before: list[str] = []  # statements the next statement needs first (a named cat input)
        self.late: list[str] = []  # read at the very end: the return also gives them
        self.values: list[tuple[str, int]] = []  # (variable, rows) of every [rows, WIDTH] value
        # States whose write-back converts the dtype: torch.export lets later reads of such a state in
        # the same method see the unconverted value (stock ExecuTorch differs from eager), so a
        # converting update is only made last, and the method does not read that state again.
        self.converted: set[str] = set()

    def lines(self) -> list[str]:
        out: list[str] = []
        updated: set[str] = set()
        for _ in range(self.rng.randint(2, 6)):
            kind = self.rng.random()
            pending = [s for s in self.states if s.name not in updated]
            if kind < 0.45 and pending:
                state = self.rng.choice(pending)
                out += self.flushed(self.update(state))
                updated.add(state.name)  # one functional update per state keeps the write-backs simple
            else:
                rows = self.rng.randint(1, INPUT_ROWS)
                name = f"v{len(self.values)}"
                out += self.flushed([f"{name} = {self.rows_expr(rows)}"])
                self.values.append((name, rows))
        for state in self.states:
            if state.name not in updated and self.rng.random() < 0.6:
                out += self.flushed(self.update(state, last=True))
        out.append(f"return {self.result()}")
        return out

    def flushed(self, statements: list[str]) -> list[str]:
        """`statements` after the ones they need first."""
        found, self.before = [*self.before, *statements], []
        return found

    # -- [rows, WIDTH] float expressions --------------------------------------------------------
    def rows_expr(self, rows: int, depth: int = 0) -> str:
        choices = ["fresh", "fresh", "state", "state", "value"]
        if depth < 2 and rows >= 2:
            choices.append("cat")
        while True:
            pick = self.rng.choice(choices)
            if pick == "fresh":
                return self.scaled(self.rows_of("x", INPUT_ROWS, rows))
            if pick == "state":
                readable = [s for s in self.states if s.name not in self.converted]
                fits = [(f"st.{s.name}", s.rows) for s in readable if s.kind == "rows" and s.rows >= rows]
                if rows <= 4:  # one [4, WIDTH] half of a stack state
                    fits += [(f"st.{s.name}[{i}]", 4) for s in readable if s.kind == "stack" for i in (0, 1)]
                if fits:
                    tensor, have = self.rng.choice(fits)
                    return self.scaled(self.rows_of(tensor, have, rows))
            if pick == "value":
                fits = [(n, r) for n, r in self.values if r >= rows]
                if fits:
                    name, r = self.rng.choice(fits)
                    return self.scaled(self.rows_of(name, r, rows))
            if pick == "cat":
                cut = self.rng.randint(1, rows - 1)
                first = self.held_across_cat(self.rows_expr(cut, depth + 1), cut)
                return f"torch.cat([{first}, {self.rows_expr(rows - cut, depth + 1)}])"

    def held_across_cat(self, expr: str, rows: int) -> str:
        """`expr`, or now and then a variable named before the statement, with a slice of it taken
        before the cat and read at the end (a slice no-op inside a cat input that PARTIAL fusion
        clones: the input's bytes must outlive the clone)."""
        if self.shapes.random() >= HELD_SHARE:
            return expr
        k = next(self.names)
        start = self.shapes.randrange(rows)
        end = self.shapes.randint(start + 1, rows)
        self.before += [f"c{k} = {expr}", f"h{k} = c{k}[{start}:{end}]"]
        self.late.append(f"(h{k} * 2).sum(0)")
        return f"c{k}"

    def rows_of(self, tensor: str, have: int, rows: int) -> str:
        start = self.rng.randint(0, have - rows)
        return tensor if rows == have else f"{tensor}[{start}:{start + rows}]"

    def scaled(self, expr: str) -> str:
        pick = self.rng.randrange(6)
        if pick == 0:
            return expr  # a bare slice (of the state: a copy of its old rows)
        if pick == 1:
            return f"({expr} * 0.5 + 1)"
        if pick == 2:
            return f"torch.sin({expr})"
        if pick == 3:
            return f"({expr} * 1.5 - 0.25)"
        if pick == 4:
            return f"torch.tanh({expr} + x.sum(0))"
        counters = [s for s in self.states if s.kind == "counter"]
        if counters:
            return f"({expr} * st.{self.rng.choice(counters).name})"  # int64 counter promoted to float
        return f"({expr} - 0.5)"

    # -- updates ----------------------------------------------------------------------------------
    def update(self, state: State, last: bool = False) -> list[str]:
        s = f"st.{state.name}"
        if state.kind == "counter":
            bump = self.rng.choice([f"{s}.add_(1)", f"{s}.copy_({s} * 2 % 7 + 1)"])
            return [bump] if "add_" in bump else self.written_back(s, f"{s} * 2 % 7 + 1", "1, 1")
        if state.kind == "stack":
            a, b = self.rng.choice(
                [(f"{s}[1]", "{e}"), ("{e}", f"{s}[0]"), ("{e}", "{e}"), (f"{s}[1]", f"{s}[0]")]
            )
            a, b = (p.format(e=self.rows_expr(4)) for p in (a, b))
            return self.written_back(s, f"torch.stack([{a}, {b}])", f"8, {WIDTH}")
        rows = state.rows
        flat = f"{rows * WIDTH}"
        pick = self.rng.randrange(7)
        if pick == 0:  # ring rotation by k rows
            k = self.rng.randint(1, rows - 1)
            return self.written_back(s, f"torch.cat([{s}[{k}:], {s}[:{k}]])", flat)
        if pick == 1:  # shift in k new rows
            k = self.rng.randint(1, rows - 1)
            return self.written_back(s, f"torch.cat([{s}[{k}:], {self.rows_expr(k)}])", flat)
        if pick == 2:  # a cat of several pieces of anything
            cuts = sorted(self.rng.sample(range(1, rows), self.rng.randint(1, min(3, rows - 1))))
            sizes = [b - a for a, b in zip([0, *cuts], [*cuts, rows])]
            return self.written_back(s, f"torch.cat([{', '.join(self.rows_expr(n) for n in sizes)}])", flat)
        if pick == 3:  # elementwise over the old value
            return [f"{s}.mul_(0.5).add_({self.rows_expr(rows)})"]
        if pick == 4:  # rows written in place
            k = self.rng.randint(1, rows)
            start = self.rng.randint(0, rows - k)
            return [f"{s}[{start}:{start + k}] = {self.rows_expr(k)}"]
        back = ")" if last else ").to(torch.float32)"  # copy_ converts back, or the value does
        if last:
            self.converted.add(state.name)
        if pick == 5:  # a dtype round trip
            new = f"({s} * 0.5 + {self.rows_expr(rows)}).to(torch.float16{back}"
        else:  # a cat computed in half precision
            cut = self.rng.randint(1, rows - 1)
            pieces = (
                f"{self.rows_expr(cut)}.to(torch.float16), {self.rows_expr(rows - cut)}.to(torch.float16)"
            )
            new = f"torch.cat([{pieces}]).to(torch.float16{back}"
        return [f"{s}.copy_({new})"] if last else self.written_back(s, new, flat)

    def written_back(self, s: str, new: str, flat: str) -> list[str]:
        """`s.copy_(new)`; or now and then the new value named first, the old state read after it
        (the write-back moves up to that read), and the new value read at the end through a view
        of shape `flat` taken before or after the copy (redirected to the state when after)."""
        if self.shapes.random() >= MOVED_SHARE:
            return [f"{s}.copy_({new})"]
        k = next(self.names)
        lines = [f"n{k} = {new}"]
        view = f"n{k}.reshape({flat})"
        if self.shapes.random() < 0.5:
            lines.append(f"f{k} = {view}")
            view = f"f{k}"
        lines += [f"o{k} = {s} * 2", f"{s}.copy_(n{k})"]
        self.late += [f"o{k}.sum(0)", f"({view} * 3)"]
        return lines

    def result(self) -> str:
        outs = [f"{name}.sum(0)" for name, _ in self.rng.sample(self.values, min(2, len(self.values)))]
        readable = [s for s in self.states if s.name not in self.converted]
        for state in self.rng.sample(readable, self.rng.randint(min(1, len(readable)), len(readable))):
            s = f"st.{state.name}"
            outs.append(self.rng.choice([f"{s} * 1", f"{s}.sum(0)", f"({s} + 1)"]))
        outs += self.late
        return f"({', '.join(outs or ['x.sum(0)'])},)"


@dataclass
class Checked:
    """What one program gave: the stock check's failure ("" if it matched eager) and each lever's."""

    program: RandomProgram
    stock: str = ""
    mismatches: dict[str, str] = field(default_factory=dict)  # str(Levers) -> first line of the failure

    def report(self) -> str:
        lines = [f"seed {self.program.seed}: stock {self.stock or 'matches eager'}"]
        lines += [f"  {levers}: {why}" for levers, why in self.mismatches.items()]
        return "\n".join([*lines, self.program.source])


def check(program: RandomProgram, levers: Sequence[Levers] = LEVERS) -> Checked:
    """Lower the program with stock planning and with each lever combination; run every call
    in executorch.runtime and compare with eager (state carried from call to call)."""
    model = program.model()
    found = Checked(program)
    try:
        runtime.check_outputs(model, runtime.lower(model).buffer)
    except AssertionError as e:
        found.stock = str(e).splitlines()[0]
    for lever in levers:
        try:
            runtime.check_outputs(model, runtime.lower(model, memory_planning_pass=lever.planner()).buffer)
        except AssertionError as e:
            found.mismatches[str(lever)] = str(e).splitlines()[0]
    return found


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="random stateful programs: every lever against eager")
    ap.add_argument("--seeds", default="0:20", help="FIRST:END (END excluded)")
    ap.add_argument("--show", action="store_true", help="print every mismatching program")
    only = ap.add_mutually_exclusive_group()
    only.add_argument("--banks-only", action="store_true", help="only the combinations with a memory map")
    only.add_argument(
        "--slice-noop-only",
        action="store_true",
        help="only the combinations with slice no-ops (every lever on)",
    )
    args = ap.parse_args(argv)
    levers = list(LEVERS)
    if args.banks_only:
        levers = [lv for lv in levers if lv.memory_map]
    if args.slice_noop_only:
        levers = [lv for lv in levers if lv.slice_noop]
    first, end = (int(v) for v in args.seeds.split(":"))
    start = time.perf_counter()
    results = []
    for seed in range(first, end):
        results.append(check(generate(seed), levers))
        wrong = results[-1].mismatches
        print(
            f"seed {seed}: {len(wrong)} mismatches{', stock differs' if results[-1].stock else ''}",
            flush=True,
        )
    bad = [r for r in results if r.mismatches or r.stock]
    if args.show:
        print("\n\n".join(r.report() for r in bad))
    by_lever = {str(lv): sum(str(lv) in r.mismatches for r in results) for lv in levers}
    print("| programs | lever combinations | runs (calls) | stock mismatches | mismatches | programs wrong |")
    print("|---:|---:|---:|---:|---:|---:|")
    runs = len(results) * len(levers)
    print(
        f"| {len(results)} | {len(levers)} | {runs} ({runs * N_CALLS}) | {sum(bool(r.stock) for r in results)}"
        f" | {sum(by_lever.values())} | {len(bad)} |"
    )
    print("\n".join(f"  {lever}: {n} mismatches" for lever, n in by_lever.items()))
    print(f"mismatching seeds: {[r.program.seed for r in bad]}; {time.perf_counter() - start:.0f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
