"""The ExecuTorch-tests harness: the substitution, the junit reading, the documented list; and (slow) the run itself."""

from __future__ import annotations

import pytest

from memplan.experiments.bench import executorch_tests as harness


def test_every_construction_and_base_is_substituted_and_nothing_else():
    source = (
        "from __future__ import annotations\n"
        "from executorch.exir.passes import MemoryPlanningPass\n"
        "class Custom(MemoryPlanningPass):\n"
        "    pass\n"
        "class CustomPoolMemoryPlanningPass(MemoryPlanningPass, object):\n"
        "    pass\n"
        "a = MemoryPlanningPass(algo, alloc_graph_input=False)\n"
        "b = CustomPoolMemoryPlanningPass(alignment=1)\n"
        "c = MemoryPlanningPass ()._set_alloc_node_spec(gm)\n"
        "d = isinstance(x, MemoryPlanningPass)\n"
    )
    text, count = harness.substitute(source)
    assert count == 4
    lines = text.splitlines()
    assert lines[:2] == ["from __future__ import annotations", harness._IMPORT.strip()]
    assert "class Custom(PlannerPass):" in lines
    assert "class CustomPoolMemoryPlanningPass(PlannerPass, object):" in lines
    assert "a = PlannerPass(algo, alloc_graph_input=False)" in lines
    assert "b = CustomPoolMemoryPlanningPass(alignment=1)" in lines  # a subclass's own construction stays
    assert "c = PlannerPass ()._set_alloc_node_spec(gm)" in lines
    assert "d = isinstance(x, MemoryPlanningPass)" in lines  # not a construction
    assert harness.substitute("x = 1\n") == ("x = 1\n", 0)


def test_junit_outcomes_and_the_regressions_they_give():
    xml = """<testsuites><testsuite>
      <testcase classname="test__a__b.py.TestX" name="test_ok" time="1.5"/>
      <testcase classname="test__a__b.TestX" name="test_bad" time="2"><failure message="x"/></testcase>
      <testcase classname="test__a__b.TestX" name="test_err" time="0"><error message="x"/></testcase>
      <testcase classname="test__a__b.TestX" name="test_skip" time="0"><skipped/></testcase>
    </testsuite></testsuites>"""
    found = harness.outcomes(xml, "a/b.py")
    assert found == {
        "a/b.py::TestX::test_ok": "passed",
        "a/b.py::TestX::test_bad": "failed",
        "a/b.py::TestX::test_err": "failed",
        "a/b.py::TestX::test_skip": "skipped",
    }
    assert harness.reported_seconds(xml) == 3.5
    stock = {**found, "a/b.py::TestX::test_bad": "passed", "a/b.py::TestX::gone": "passed"}
    result = harness.FileResult("a/b.py", 1, {"stock": stock, "PlannerPass": found})
    assert result.regressions("PlannerPass") == ["a/b.py::TestX::gone", "a/b.py::TestX::test_bad"]
    assert (result.passed("stock"), result.passed("PlannerPass"), result.passed("algorithm")) == (3, 1, 0)


def test_the_documented_list_classifies_failures_and_finds_stale_entries():
    text = (
        "| test | copy | kind | reason |\n|---|---|---|---|\n"
        "| `a/b.py::TestX::test_bad` | PlannerPass | difference | greedy's offsets |\n"
        "| `a/b.py::TestX::test_ok` | algorithm | open | issue 21 |\n"
    )
    entries = harness.documented(text)
    assert harness.classify("PlannerPass", "a/b.py::TestX::test_bad", entries) == "difference"
    assert (
        harness.classify("algorithm", "a/b.py::TestX::test_bad", entries) == "bug"
    )  # listed for the other copy
    assert harness.classify("PlannerPass", "a/b.py::TestX::other", entries) == "bug"
    result = harness.FileResult("a/b.py", 1, {"algorithm": {"a/b.py::TestX::test_ok": "passed"}})
    assert harness.stale([result], entries) == [("algorithm", "a/b.py::TestX::test_ok")]
    with pytest.raises(ValueError, match="line 3: kind 'maybe'"):
        harness.documented(
            "| t | c | k | r |\n|---|---|---|---|\n| `a.py::t` | PlannerPass | maybe | why |\n"
        )
    with pytest.raises(ValueError, match="line 3: copy 'stock'"):
        harness.documented("| t | c | k | r |\n|---|---|---|---|\n| `a.py::t` | stock | open | why |\n")


def test_the_repository_list_is_well_formed_and_names_suite_files():
    entries = harness.documented(harness.DIFFERENCES.read_text())
    assert entries
    assert {test.split("::")[0] for _, test in entries} <= set(harness.SUITE)
    assert all(entry.reason for entry in entries.values())


def test_a_planner_pass_variant_is_the_planner_pass_copy_with_its_lever_given(tmp_path):
    """`slice_noop`: every construction substituted as in `PlannerPass`, the lever on unless the caller
    says otherwise; a failure listed for `PlannerPass` is classified as listed, any other is a bug."""
    counts = harness.prepare(tmp_path, ["exir/tests/test_remove_view_copy.py"], "slice_noop")
    assert counts == harness.prepare(
        tmp_path / "plain", ["exir/tests/test_remove_view_copy.py"], "PlannerPass"
    )
    assert counts["exir/tests/test_remove_view_copy.py"] > 0
    conftest = (tmp_path / "conftest.py").read_text()
    assert "{'slice_noop': True}" in conftest and "memplan.PlannerPass = PlannerPass" in conftest
    assert conftest.index("memplan.PlannerPass = PlannerPass") < conftest.index(
        "ExecutorchBackendConfig.__init__ ="
    )
    assert "{'slice_noop': False}" in harness.conftest_patch("slice_noop_off")
    entries = harness.documented(
        "| t | c | k | r |\n|---|---|---|---|\n| `a.py::T::t` | PlannerPass | difference | why |\n"
    )
    assert harness.classify("slice_noop", "a.py::T::t", entries) == "difference"
    assert harness.classify("slice_noop", "a.py::T::other", entries) == "bug"
    assert harness.classify("algorithm", "a.py::T::t", entries) == "bug"  # not a PlannerPass variant


@pytest.mark.slow
def test_executorch_tests_fail_with_planner_pass_only_as_documented(tmp_path):
    """Every ExecuTorch test passing with the stock pass passes in the other copies, or is listed (~1.5 h on 2 cores)."""
    results = harness.run(harness.SUITE, tmp_path, timeout_s=3600)
    entries = harness.documented(harness.DIFFERENCES.read_text())
    assert sum(r.passed("stock") for r in results) > 300  # the stock copies really ran
    bugs = [
        (copy, test)
        for r in results
        for copy in r.outcomes
        if copy != "stock"
        for test in r.regressions(copy)
        if harness.classify(copy, test, entries) == "bug"
    ]
    assert not bugs
    assert not harness.stale(results, entries)
