"""`memplan sweep --memory-map`: runs across banks, per-bank columns, clear errors for a bad map."""

from __future__ import annotations

import pytest

from memplan.errors import UsageError
from memplan.experiments.sweep import grid as sweep_grid
from memplan.experiments.sweep import run as sweep
from memplan.planner.memory.bank_maps import parse_memory_map

MAP = "sram:1KiB,dram:16MiB"


def test_a_memory_map_parses_in_preference_order_with_units_and_alignment() -> None:
    target = parse_memory_map("tcm:512:64, sram:64KiB,dram:16MiB")
    assert [(b.name, b.size, b.mem_id, b.alignment) for b in target.banks] == [
        ("tcm", 512, 1, 64),
        ("sram", 64 * 1024, 2, None),
        ("dram", 16 * 1024 * 1024, 3, None),
    ]
    for bad, match in (
        ("sram", "name:size"),
        ("sram:lots", "size 'lots'"),
        ("", "names no bank"),
        ("64KiB,dram:1MiB", "bank '64KiB' is not name:size"),  # a bare size only alone
    ):
        with pytest.raises(ValueError, match=match):
            parse_memory_map(bad)


def test_a_bare_size_is_one_bank_everywhere_a_bank_list_is_taken() -> None:
    from memplan.planner.memory.bank_maps import ONE_BANK, parse_one_size

    for spec, size in (("150000", 150_000), (" 256 KiB ", 256 * 1024)):
        (bank,) = parse_memory_map(spec).banks
        assert (bank.name, bank.size, bank.mem_id, bank.alignment) == (ONE_BANK, size, 1, None)
    assert parse_one_size("146KiB", "--budget") == parse_one_size("sram:146KiB", "--budget") == 149_504
    with pytest.raises(ValueError, match=r"--budget 'a:1,b:2' names 2 banks; give one size"):
        parse_one_size("a:1,b:2", "--budget")
    with pytest.raises(ValueError, match=r"budget '1\.5MiB': bank '1\.5MiB' is not name:size"):
        parse_memory_map("1.5MiB", "budget")


def test_bad_maps_and_bankless_solvers_are_refused_before_any_work(tmp_path) -> None:
    with pytest.raises(UsageError, match=r"\['milp'\] cannot plan across the banks"):
        sweep.sweep(out=tmp_path, models=["cat_seed"], solvers=["milp"], memory_map=MAP, progress=False)
    with pytest.raises(UsageError, match="size '12XB'"):
        sweep.sweep(out=tmp_path, models=["cat_seed"], memory_map="sram:12XB", progress=False)


def test_runs_with_a_map_are_their_own_units_and_old_keys_stay() -> None:
    plain = sweep_grid.PlanRun("m", "greedy", 16, True, 5.0)
    banked = sweep_grid.PlanRun("m", "greedy", 16, True, 5.0, memory_map=MAP)
    assert MAP not in plain.key and banked.key == plain.key + (MAP,)


def test_sweep_with_a_memory_map_reports_per_bank_columns(tmp_path) -> None:
    df = sweep.sweep(out=tmp_path, models=["cat_seed"], memory_map=MAP, jobs=1, progress=False, check=True)
    assert sorted(df["solver"]) == ["bestfit", "cpsat", "greedy"]
    assert df["error"].isna().all() and df["matches_eager"].all()
    assert (df["memory_map"] == MAP).all()
    for bank in ("sram", "dram"):
        assert {f"{bank}_bytes", f"{bank}_peak", f"{bank}_traffic_share"} <= set(df.columns)
    assert (df["sram_bytes"] <= 1024).all()
    assert ((df["sram_traffic_share"] + df["dram_traffic_share"]).round(9) == 1).all()
    assert df["stock_arena_bytes"].notna().all()  # ExecuTorch's own banked pass, at the same map
