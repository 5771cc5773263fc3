"""The MILP's backends, CBC and HiGHS through PuLP: making one with the caller's options, and
keeping their output off stdout when not asked for."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any

import pulp

from memplan.errors import SolverOptionError

BACKENDS = ("cbc", "highs")

CBC_PREPROCESS = "preprocess off"
"""CBC 2.10.3's integer preprocessing declares feasible models infeasible (a 4-buffer reproducer in
tests/solvers/test_milp.py: "Pre-processing says infeasible" where the optimum is 152), so it is off
unless the caller passes a `preprocess` option; without it CBC proves as much in about the same time
(docs/exact_solver.md)."""


def strict_gaps(options: dict[str, Any]) -> bool:
    """False when the caller loosened the gap, so 'optimal' from the solver means 'close enough'."""
    relative = max(options.get("gapRel") or 0.0, options.get("mip_rel_gap") or 0.0)
    absolute = max(options.get("gapAbs") or 0.0, options.get("mip_abs_gap") or 0.0)
    return relative == 0.0 and absolute < 1.0


def make_solver(backend: str, msg: bool, options: dict[str, Any]) -> pulp.LpSolver:
    """The PuLP solver, built first so that bad options fail before any work.

    Gaps: the objective is integral, so an absolute gap below 1 proves optimality
    (HiGHS's default relative gap of 1e-4 would not).
    """
    settings = {"msg": msg, "gapRel": 0.0, "gapAbs": 0.999} | options
    try:
        if backend == "cbc":
            extra = list(settings.pop("options", None) or [])
            if not any("preprocess" in str(o) for o in extra):
                extra.append(CBC_PREPROCESS)
            return pulp.COIN_CMD(path=pulp.PULP_CBC_CMD.pulp_cbc_path, options=extra, **settings)
        solver = HiGHSSolver(**settings)
    except TypeError as err:
        raise SolverOptionError(
            f"milp: backend {backend!r} does not accept the options {options}: {err}"
        ) from None
    solver.check_options()
    return solver


class HiGHSSolver(pulp.HiGHS):
    """PuLP's HiGHS with a warm start and without the one-time banner on stdout."""

    warm_start = False

    def check_options(self) -> None:
        """HiGHS ignores unknown option names silently; refuse them instead."""
        import highspy

        with _quiet_stdout(enabled=not self.msg):
            probe = highspy.Highs()
        probe.setOptionValue("output_flag", False)
        for key, value in self.optionsDict.items():
            if probe.setOptionValue(key, value) != highspy.HighsStatus.kOk:
                raise SolverOptionError(f"milp: HiGHS rejects the option {key}={value!r}")

    def createAndConfigureSolver(self, lp: pulp.LpProblem) -> None:
        import highspy

        if self.threads is not None:  # HiGHS refuses a thread count once its scheduler runs
            highspy.Highs.resetGlobalScheduler(True)
        with _quiet_stdout(enabled=not self.msg):
            super().createAndConfigureSolver(lp)

    def callSolver(self, lp: pulp.LpProblem) -> None:
        import highspy

        if self.warm_start:
            start = highspy.HighsSolution()
            columns = sorted(lp.variables(), key=lambda v: v.index)
            start.col_value = [float(v.varValue or 0) for v in columns]
            start.value_valid = True
            lp.solverModel.setSolution(start)
        super().callSolver(lp)
        failed = {
            highspy.HighsModelStatus.kLoadError,
            highspy.HighsModelStatus.kModelError,
            highspy.HighsModelStatus.kPresolveError,
            highspy.HighsModelStatus.kSolveError,
            highspy.HighsModelStatus.kPostsolveError,
            highspy.HighsModelStatus.kNotset,
        }
        outcome = lp.solverModel.getModelStatus()
        if outcome in failed:
            raise pulp.PulpSolverError(
                f"HiGHS status {lp.solverModel.modelStatusToString(outcome)}; rerun with msg=True for its log"
            )


@contextlib.contextmanager
def _quiet_stdout(enabled: bool) -> Iterator[None]:
    """Silence file descriptor 1: HiGHS prints its banner from C++ on construction."""
    if not enabled:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 1)
            yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


# -- from solver offsets to a valid plan ------------------------------------------
