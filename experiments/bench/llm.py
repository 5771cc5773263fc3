"""`to_executorch` with `PlannerPass()` against the stock `MemoryPlanningPass()` on real LLM shapes.

    python -m memplan.experiments.bench.llm [--models smollm2-135m,qwen3-0.6b,llama3.2-1b]
        [--modes prefill,decode,two-method] [--layers smollm2-135m=30,qwen3-0.6b=8]
        [--deep smollm2-135m:48:two-method] [--repeat 2]
        [--jsonl results.jsonl] [--tables-from results.jsonl]

ExecuTorch's own `llama_transformer` with random weights at the shapes of
SmolLM2-135M, Qwen3-0.6B and Llama-3.2-1B (the layer count can be cut to keep
memory and time down; the table says how many were used), plus `--deep`
cases with more layers than the real model, to reach 10,000 tensors. Modes: `prefill`
is exported like `export_llama --use_kv_cache` with a dynamic token dimension
(up to max_context_len - 1 tokens, so planned at that size), `decode` one
token, static; `two-method` both in one program, sharing the KV cache.

Each case runs in its own subprocess (peak RSS is that process's, export
included). The case is exported once; stock and memplan each lower a copy of
that edge program (the copy is not timed), one after the other, `--repeat`
times, alternating which goes first; seconds are the best of those lowerings
(the first lowering in a process pays for warming up: up to 10x the next on
Llama-3.2-1B shapes, so the default `--repeat 2` gives each pass a warm run). Columns:
planned tensors (over all methods), arena bytes (per mem_id the largest over the methods, summed: what
a runtime sharing arenas across methods needs), memplan's lower bound, whether
every method's plan is proven optimal, `to_executorch` seconds and the ratio.

The second table says where memplan's pass spends its time (seconds summed
over methods, wall clock): state in place, extraction, cat-fusion analysis and
solving together, the solver alone, writing the plan, inserting frees,
removing fused cats, the storage-reuse check, slice no-ops, the proof
re-check on the emitted program (within it: emitting the program a second
time and reading it back, when the cheap certificate does not settle it),
cross-method state (which holds the re-check); and the stock pass's whole
`run` for comparison.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import functools
import gc
import inspect
import json
import resource
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from memplan.experiments import flags
from memplan.experiments.markdown import StreamedTable

# name -> (ModelArgs fields, layers of the real model)
SHAPES: dict[str, dict[str, int]] = {
    "smollm2-135m": dict(dim=576, n_layers=30, n_heads=9, n_kv_heads=3, hidden_dim=1536, vocab_size=49152),
    "qwen3-0.6b": dict(dim=1024, n_layers=28, n_heads=16, n_kv_heads=8, hidden_dim=3072, vocab_size=151936),
    "llama3.2-1b": dict(dim=2048, n_layers=16, n_heads=32, n_kv_heads=8, hidden_dim=8192, vocab_size=128256),
    # A dim-256 class model (TinyStories-sized): deep and narrow, so the pass's per-tensor work shows.
    "llama-d256": dict(dim=256, n_layers=20, n_heads=8, n_kv_heads=4, hidden_dim=768, vocab_size=32000),
}
# Layers used by default: the whole model where it fits the time and memory of a shared 2-core machine.
DEFAULT_LAYERS = {"smollm2-135m": 30, "qwen3-0.6b": 8, "llama3.2-1b": 2, "llama-d256": 20}
# Cases deeper than any real model above, run by default too: the pass's cost at 10,000 tensors.
DEEP_CASES = "smollm2-135m:48:two-method"
MAX_CONTEXT = 256
PREFILL_TOKENS = 64
MODES = ("prefill", "decode", "two-method")

# Timed phases of memplan's pass: label -> (a word of the defining module, function names). A phase
# is found by the function objects themselves (`_phase_functions`), not by the dotted path the pass
# imports them from, so moving a module does not break the timing; a phase that matches nothing is an
# error (`timed_phases`), and tests/experiments/bench/test_llm.py enters it on a tiny model.
PHASES: dict[str, tuple[str, tuple[str, ...]]] = {
    "state in place": ("state_in_place", ("analyze", "rewrite")),
    "extract": ("extract", ("extract",)),
    "cat fusion analysis + solve": ("cat", ("plan_with_cat_fusion",)),
    "solve": ("solvers", ("solve",)),
    "write plan": ("apply", ("apply_plan",)),
    "insert frees": ("executorch.exir.memory_planning", ("insert_calls_to_free",)),
    "remove fused cats": ("cat", ("fuse_cats",)),
    "storage-reuse check": ("verify", ("verify_storage_reuse",)),
    "slice no-ops": ("slice_noop", ("analyze_slices", "remove_noop_slices")),
    "proof re-check": ("proof_check", ("check_proofs",)),
    "re-check: emit + read back": ("proof_check", ("emitted_bounds",)),
}


def model_args(shape: str, layers: int, *, prefill: bool):
    from executorch.examples.models.llama.model_args import ModelArgs

    fields = dict(SHAPES[shape], n_layers=layers)
    return ModelArgs(
        **fields,
        max_batch_size=1,
        max_seq_len=MAX_CONTEXT,
        max_context_len=MAX_CONTEXT,
        use_kv_cache=True,
        enable_dynamic_shape=True,
        use_sdpa_with_kv_cache_op=False,
        generate_full_logits=False,
    )


def zoo_model(shape: str, layers: int, mode: str):
    """The case as a `ZooModel` (random weights, fixed seed)."""
    import torch
    from torch import nn
    from torch.export import Dim

    from memplan.experiments.zoo import ZooModel
    from memplan.experiments.zoo.models.common import zoo_recipe
    from memplan.experiments.zoo.models.llama import build_transformer

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = build_transformer(model_args(shape, layers, prefill=mode != "decode"))
    vocab = SHAPES[shape]["vocab_size"]

    def inputs(tokens: int) -> tuple:
        return (torch.randint(0, vocab, (1, tokens)), {"input_pos": torch.tensor([0], dtype=torch.long)})

    token_dim = ({1: Dim("token_dim", max=MAX_CONTEXT - 1)}, {"input_pos": None})
    if mode == "two-method":

        class Method(nn.Module):
            def __init__(self, transformer: nn.Module) -> None:
                super().__init__()
                self.model = transformer

            def forward(self, tokens, attn_options):
                return self.model(tokens, attn_options)

        methods: dict[str, tuple[nn.Module, tuple]] = {
            "prefill": (Method(model), inputs(PREFILL_TOKENS)),
            "decode": (Method(model), inputs(1)),
        }
        return ZooModel(
            f"{shape}-{mode}",
            "prefill + decode sharing the KV cache",
            methods,
            [],
            dynamic_shapes={"prefill": token_dim},
            memory_planning_config={"share_mutable_buffers": True},
            **zoo_recipe(const_prop=False),  # no const prop across methods that share state
            shared_state=True,
        )
    tokens = PREFILL_TOKENS if mode == "prefill" else 1
    return ZooModel(
        f"{shape}-{mode}",
        mode,
        {"forward": (model, inputs(tokens))},
        [],
        dynamic_shapes={"forward": token_dim} if mode == "prefill" else None,
        **zoo_recipe(),
    )


def _phase_functions(where: str, names: tuple[str, ...]) -> set[Any]:
    """The functions called `names` defined in a module whose dotted name contains `where`, among
    every loaded memplan module's attributes (where the pass looks them up)."""
    found = set()
    for module in _memplan_modules():
        for value in vars(module).values():
            if (
                inspect.isfunction(value)
                and value.__name__ in names
                and where in (value.__module__ or "").split(".") + [value.__module__]
            ):
                found.add(value)
    return found


def _memplan_modules() -> list[Any]:
    return [m for n, m in list(sys.modules.items()) if n.startswith("memplan.") and m is not None]


@contextlib.contextmanager
def timed_phases() -> Iterator[dict[str, float]]:
    """Seconds per phase of memplan's pass, by wrapping the functions the pass calls wherever a memplan
    module holds them (so `from x import f` in the pass sees the wrapper too)."""
    from memplan import PlannerPass  # noqa: F401 - loads the pass and every module it calls

    spent: dict[str, float] = defaultdict(float)
    wrappers: dict[Any, Any] = {}
    for label, (where, names) in PHASES.items():
        functions = _phase_functions(where, names)
        if not functions:
            raise LookupError(f"phase {label!r}: no function {names} in a module named *{where}*")
        for original in functions:
            wrappers[original] = _timed(original, spent, label)
    undo: list[tuple[Any, str, Any]] = []
    for module in _memplan_modules():
        for attribute, value in list(vars(module).items()):
            if inspect.isfunction(value) and value in wrappers:
                setattr(module, attribute, wrappers[value])
                undo.append((module, attribute, value))
    try:
        yield spent
    finally:
        for module, attribute, original in undo:
            setattr(module, attribute, original)


def _timed(original: Callable[..., Any], spent: dict[str, float], label: str) -> Callable[..., Any]:
    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            spent[label] += time.perf_counter() - began

    return wrapper


def _timed_method(obj: Any, name: str, spent: dict[str, float], label: str) -> None:
    setattr(obj, name, _timed(getattr(obj, name), spent, label))


def lower_once(model, which: str) -> dict[str, Any]:
    """Time `to_executorch` with the stock pass or `PlannerPass()` on a copy of the model's edge program.

    Every lowering takes a copy, so each sees the same objects alive (when the
    last lowering took the original, the pass going last looked up to 1.5x
    faster on Llama-3.2-1B shapes; with copies the two passes' best runs agree).
    """
    from executorch.exir import ExecutorchBackendConfig

    from memplan.experiments.zoo import runtime
    from memplan.planner.pass_ import PlannerPass

    edge = copy.deepcopy(runtime.edge_program(model))
    spent: dict[str, float] = defaultdict(float)
    if which == "stock":
        pass_ = runtime.stock_memory_planning_pass(model)
        phases: contextlib.AbstractContextManager = contextlib.nullcontext(spent)
    else:
        pass_ = PlannerPass()
        phases = timed_phases()
    _timed_method(pass_, "run", spent, "pass run")
    _timed_method(pass_, "run_multimethod", spent, "cross-method state")
    config = ExecutorchBackendConfig(memory_planning_pass=pass_, **model.backend_config)
    with phases as inner:
        began = time.perf_counter()
        program = edge.to_executorch(config)
        seconds = time.perf_counter() - began
    spent.update(inner)
    sizes = runtime.stock_arena_bytes(program)
    stats = runtime.program_stats(program)
    result: dict[str, Any] = {
        "seconds": seconds,
        "arena": runtime.program_arena_bytes(sizes),
        "tensors": sum(s["planned_tensors"] for s in stats.values()),
        "phases": dict(spent),
    }
    if which == "memplan":
        plans = [r.plan for r in pass_.results.values()]
        result["lower_bound"] = _program_bound(pass_.results)
        result["proven"] = all(p.proven_optimal for p in plans)
        result["solvers"] = sorted({p.solver for p in plans})
    del program, edge
    gc.collect()
    return result


def _program_bound(results: dict) -> int:
    """Per pool, the largest per-method lower bound, summed (methods share arenas)."""
    from memplan.peak_bound import lower_bounds

    best: dict[int, int] = defaultdict(int)
    for r in results.values():
        for pool, bound in lower_bounds(r.problem).items():
            best[pool] = max(best[pool], bound + (r.padding if bound else 0))
    return sum(best.values())


def run_case(shape: str, layers: int, mode: str, repeat: int) -> dict[str, Any]:
    """Both passes on one case, `repeat` times, alternating the order."""
    import torch

    torch.set_num_threads(1)
    model = zoo_model(shape, layers, mode)
    runs: dict[str, list[dict[str, Any]]] = {"stock": [], "memplan": []}
    for i in range(repeat):
        order = ("stock", "memplan") if i % 2 == 0 else ("memplan", "stock")
        for which in order:
            runs[which].append(lower_once(model, which))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"shape": shape, "layers": layers, "mode": mode, "runs": runs, "peak_rss": peak}


def _in_subprocess(shape: str, layers: int, mode: str, repeat: int) -> dict[str, Any]:
    command = [sys.executable, "-m", "memplan.experiments.bench.llm", "--case", f"{shape}:{layers}:{mode}"]
    command += ["--repeat", str(repeat)]
    done = subprocess.run(command, capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = "\n".join(done.stderr.splitlines()[-15:])
        raise SystemExit(f"case {shape}:{mode} failed (exit {done.returncode}):\n{tail}")
    return json.loads(lines[-1])


def print_tables(cases: Sequence[dict[str, Any]]) -> None:
    columns = [
        "model",
        "layers",
        "mode",
        "tensors",
        "stock arena",
        "memplan arena",
        "lower bound",
        "proven",
        "stock s",
        "memplan s",
        "memplan / stock",
        "peak RSS GiB",
    ]
    table = StreamedTable(columns)
    for c in cases:
        stock, ours = c["runs"]["stock"], c["runs"]["memplan"]
        s, m = min([r["seconds"] for r in stock]), min([r["seconds"] for r in ours])
        table.row(
            [
                c["shape"],
                c["layers"],
                c["mode"],
                ours[0]["tensors"],
                stock[0]["arena"],
                ours[0]["arena"],
                ours[0]["lower_bound"],
                bool(ours[0]["proven"]),
                f"{s:.1f}",
                f"{m:.1f}",
                f"{m / s:.2f}",
                f"{c['peak_rss'] / 2**30:.1f}",
            ]
        )
    labels: list[str] = []
    for c in cases:
        for r in c["runs"]["memplan"]:
            labels += [k for k in r["phases"] if k not in labels]
    print()
    table = StreamedTable(["model", "mode", "stock pass run s"] + [f"{k} s" for k in labels])
    for c in cases:
        stock, ours = c["runs"]["stock"], c["runs"]["memplan"]
        cells = [c["shape"], c["mode"], f"{min([r['phases'].get('pass run', 0) for r in stock]):.2f}"]
        table.row(cells + [f"{min([r['phases'].get(k, 0.0) for r in ours]):.2f}" for k in labels])


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    flags.add_list(parser, "--models", SHAPES, "model", "LLM shapes", choices=tuple(SHAPES))
    flags.add_list(parser, "--modes", MODES, "mode", "lowering modes", choices=MODES)
    parser.add_argument(
        "--layers", default="", help=f"e.g. qwen3-0.6b=8,llama3.2-1b=2 (default: {DEFAULT_LAYERS})"
    )
    parser.add_argument(
        "--deep",
        default=DEEP_CASES,
        help="extra shape:layers:mode cases, comma-separated, run when their model and mode are selected"
        " ('' for none)",
    )
    parser.add_argument("--repeat", type=int, default=2, help="lowerings per pass and case")
    parser.add_argument("--jsonl", help="also append each case's result to this file as it finishes")
    parser.add_argument("--tables-from", help="print the tables of a --jsonl file and exit")
    parser.add_argument("--case", help=argparse.SUPPRESS)  # shape:layers:mode, run in this process
    args = parser.parse_args(argv)
    if args.case:
        shape, layers, mode = args.case.split(":")
        print(json.dumps(run_case(shape, int(layers), mode, args.repeat)), flush=True)
        return
    if args.tables_from:
        with open(args.tables_from) as f:
            print_tables([json.loads(line) for line in f if line.strip()])
        return
    layers = dict(DEFAULT_LAYERS)
    for item in filter(None, args.layers.split(",")):
        name, _, count = item.partition("=")
        layers[name] = int(count)
    models, modes = args.models, args.modes
    todo = [(shape, layers[shape], mode) for shape in models for mode in modes]
    for item in filter(None, args.deep.split(",")):
        shape, depth, mode = item.split(":")
        if shape in models and mode in modes:
            todo.append((shape, int(depth), mode))
    cases = []
    for shape, depth, mode in todo:
        cases.append(_in_subprocess(shape, depth, mode, args.repeat))
        if args.jsonl:
            with open(args.jsonl, "a") as f:
                f.write(json.dumps(cases[-1]) + "\n")
        print(f"done {shape} {depth} layers {mode}", file=sys.stderr, flush=True)
    print_tables(cases)


if __name__ == "__main__":
    main()
