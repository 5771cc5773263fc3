"""Damaged and hostile `.pte` files (issue 20, item 4): one clear error each, live overlaps reported.

Each damage is made by editing a stock-built program's deserialized form and writing it back, so the
flatbuffer parses and only memplan's own reading stands between the damage and a traceback.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from executorch.exir import schema
from helpers.cli import run_cli

from memplan.experiments import zoo
from memplan.experiments.cli.inspect import format_program
from memplan.experiments.zoo import runtime
from memplan.experiments.zoo.pte_check import OriginalFailsError, check_same_outputs
from memplan.planner.compat import deserialize_pte_binary, serialize_pte_binary
from memplan.planner.pte.program import read_program
from memplan.planner.pte.replan import replan
from memplan.planner.pte.structure import PteError


@pytest.fixture(scope="module")
def cat_seed() -> bytes:
    """cos(x), sin(x) -> cat -> sigmoid: values 1, 2 (pieces), 3 (cat), 4 (their list), 5 (dim), 6 (out)."""
    return runtime.lower(zoo.get("cat_seed")).buffer


def _edited(data: bytes, edit: Callable[[schema.ExecutionPlan], None]) -> bytes:
    pte = deserialize_pte_binary(data)
    edit(pte.program.execution_plan[0])
    return bytes(serialize_pte_binary(pte, extract_delegate_segments=True))


def _planned(plan: schema.ExecutionPlan) -> list[schema.Tensor]:
    return [
        v.val for v in plan.values if isinstance(v.val, schema.Tensor) and v.val.allocation_info is not None
    ]


def _argument_past_the_end(plan: schema.ExecutionPlan) -> None:
    plan.chains[0].instructions[0].instr_args.args[1] = len(plan.values) + 5


def _list_item_past_the_end(plan: schema.ExecutionPlan) -> None:
    next(v.val for v in plan.values if isinstance(v.val, schema.TensorList)).items[0] = 1000


def _negative_dimension(plan: schema.ExecutionPlan) -> None:
    _planned(plan)[-1].sizes[0] = -3


def _past_the_arena(plan: schema.ExecutionPlan) -> None:
    plan.non_const_buffer_sizes[1] = 16


def _unknown_arena(plan: schema.ExecutionPlan) -> None:
    _planned(plan)[0].allocation_info.memory_id = 7


def _device_of_an_unknown_arena(plan: schema.ExecutionPlan) -> None:
    plan.non_const_buffer_device = [schema.NonConstBufferDevice(5, schema.DeviceType.CUDA, 0)]


def _operator_past_the_end(plan: schema.ExecutionPlan) -> None:
    plan.chains[0].instructions[1].instr_args.op_index = 40


DAMAGE = {
    "argument past the values": (
        _argument_past_the_end,
        r"instruction 0 of chain 0: an argument names value 12",
    ),
    "list item past the values": (_list_item_past_the_end, r"the tensor list at value 4 names value 1000"),
    "negative dimension": (_negative_dimension, r"value 6 has a negative dimension -3"),
    "tensor past its arena": (
        _past_the_arena,
        r"value 0 lies at bytes \[\d+, \d+\) of arena 1, which has 16",
    ),
    "unknown arena": (_unknown_arena, r"value 0 is planned in arena 7, but the method's arenas are 1\.\.1"),
    "operator past the end": (_operator_past_the_end, r"instruction 1 of chain 0 calls operator 40, but"),
    "device of an unknown arena": (
        _device_of_an_unknown_arena,
        r"non_const_buffer_device puts arena 5 on a device, but the method's arenas are 1\.\.1",
    ),
}


@pytest.mark.parametrize("edit,message", DAMAGE.values(), ids=list(DAMAGE))
def test_damage_inside_a_parsing_flatbuffer_is_a_pte_error_naming_method_and_value(cat_seed, edit, message):
    with pytest.raises(PteError, match=r"data: method 'forward': " + message):
        read_program(_edited(cat_seed, edit))


def _run(argv: list[str], capsys) -> tuple[int, str]:
    code, _, err = run_cli(argv, capsys)
    return code, err


def _one_error_line(code: int, err: str) -> str:
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("memplan: error: "), err
    return err


def test_inspect_and_replan_give_one_error_line_and_exit_2_for_damage_and_hostile_paths(
    cat_seed, tmp_path, capsys
):
    damaged = tmp_path / "damaged.pte"
    damaged.write_bytes(_edited(cat_seed, _argument_past_the_end))
    loop = tmp_path / "loop.pte"
    loop.symlink_to(loop)
    folder = tmp_path / "folder.pte"
    folder.mkdir()
    newline = tmp_path / "bad\nname.pte"
    newline.write_bytes(b"")
    for path, says in (
        (damaged, "an argument names value 12"),
        (loop, "Too many levels of symbolic links"),
        (folder, "it is a directory, not a file"),
        (Path("/dev/zero"), "it is a device, pipe or socket, not a file"),  # reading it would never end
        (newline, "bad\\nname.pte: not an ExecuTorch program"),
    ):
        for argv in (
            ["inspect", str(path)],
            ["replan", str(path), "--out", str(tmp_path / "o.pte"), "--check"],
        ):
            assert says in _one_error_line(*_run(argv, capsys)), argv
    assert not (tmp_path / "o.pte").exists()


def _all_at_offset_zero(plan: schema.ExecutionPlan) -> None:
    for t in _planned(plan):
        t.allocation_info.memory_offset_low = 0


def test_a_layout_whose_live_tensors_overwrite_each_other_is_reported_and_kept(cat_seed):
    """All of cat_seed's tensors at offset 0: sin's result overwrites cos's before cat reads it."""
    data = _edited(cat_seed, _all_at_offset_zero)
    method = read_program(data).methods["forward"]
    assert method.problem is None and "live overlap" in method.cannot[0]
    pairs = {(o.reader, o.writer, o.instruction) for o in method.overlaps}
    assert (1, 2, 2) in pairs  # v1 (cos) read by cat at instruction 2 after v2 (sin) wrote over it
    report = format_program(read_program(data))
    assert "live overlap: v1 is read at instruction 2 after v2 wrote over its bytes [0, " in report
    assert not replan(data, "bestfit", require_saving=False).changed  # such a method keeps its layout
    assert read_program(cat_seed).methods["forward"].overlaps == []  # the stock layout has none


def _int_argument_as_a_list(plan: schema.ExecutionPlan) -> None:
    """An Int argument turned into a tensor list: the kernel's toInt() is an ExecuTorch check that aborts."""
    tensors = [i for i, v in enumerate(plan.values) if isinstance(v.val, schema.Tensor)]
    used = {
        a
        for ins in plan.chains[0].instructions
        if isinstance(ins.instr_args, schema.KernelCall)
        for a in ins.instr_args.args
    }
    index = next(i for i, v in enumerate(plan.values) if isinstance(v.val, schema.Int) and i in used)
    plan.values[index].val = schema.TensorList(tensors[:2])


def test_a_program_that_aborts_the_runtime_is_a_clear_check_error(cat_seed):
    data = _edited(cat_seed, _int_argument_as_a_list)
    with pytest.raises(
        OriginalFailsError,
        match=r"original program does not run: the runtime ended the process with SIGABRT.*toInt",
    ):
        check_same_outputs(data, data)


@pytest.mark.slow  # lowers lstm (cat_seed's stock plan cannot shrink, so its check never runs)
def test_replan_check_of_an_aborting_original_exits_2_in_one_line(tmp_path, capsys):
    """lstm's stock plan leaves room, so replan changes it and --check runs the (damaged) original."""
    source = tmp_path / "lstm.pte"
    source.write_bytes(_edited(runtime.lower(zoo.get("lstm")).buffer, _int_argument_as_a_list))
    capsys.readouterr()  # what lowering printed is not the command's
    out = tmp_path / "out.pte"
    code, err = _run(["replan", str(source), "--out", str(out), "--solver", "bestfit", "--check"], capsys)
    assert "cannot check, " in _one_error_line(code, err) and "SIGABRT" in err
    assert not out.exists() and os.path.exists(source)
