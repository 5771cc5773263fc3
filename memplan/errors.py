"""Every error memplan raises on purpose, in one hierarchy under `MemplanError`.

    MemplanError
    ├── ProblemError (ValueError)           the input is wrong: names the buffer, constraint or file line
    │   ├── InfeasibleError                 no plan fits the capacity (`proven`: shown impossible, or none found)
    │   │   └── BankCapacityError           a memory bank cannot hold what must go into it (`bank`, `missing`)
    │   ├── UnsupportedProblemError         the solver lacks a capability the problem needs (`capability`)
    │   ├── InvalidPlanError                a plan breaks the problem's constraints (`violations`)
    │   ├── ExtractionError                 an ExecuTorch graph cannot become a `Problem`
    │   └── PlanningError                   the pass cannot plan or rewrite a method
    │       └── SharedStatePolicyError      the program's methods disagree on how their shared state is planned
    ├── SolverOptionError (ValueError)      an unknown solver name or a bad solver option
    │   └── UnknownSolverError
    ├── SolverFailure (RuntimeError)        a solver or its backend broke; a bug, not the input's fault
    ├── UsageError (ValueError)             a command, script or sweep asked for what does not exist or
    │   │                                   cannot work (a name, a setting, an output path)
    │   ├── UnknownModelError (KeyError)    not a zoo model (experiments.zoo.catalog)
    │   └── ProgramSpecError                a .pt2 or file.py:factory that cannot be loaded (experiments.zoo.programs)
    ├── ModelError                          the user's own model fails (torch.export of a method): names the
    │                                       model, the method and the user's frame (experiments.zoo.model_errors)
    ├── ExecutorUnavailableError (RuntimeError)  the sweep's executor cannot run here (experiments.sweep.executors)
    └── CheckError (AssertionError)         a re-planned program runs differently from the original
                                            (experiments.zoo.pte_check)

The command line (`memplan`) ends on any of these with one `memplan: error: ...` line.

A specific error keeps its type on the way up: callers add context with
`add_note` instead of wrapping it, so `except InfeasibleError` works at every
level. This module imports nothing, so every layer can use it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class MemplanError(Exception):
    """Base of every error memplan raises on purpose."""


class ProblemError(MemplanError, ValueError):
    """A problem (or a plan, file or graph given as one) is malformed; the message names what."""


class InfeasibleError(ProblemError):
    """No plan fits the requested capacity.

    `buffers` names the buffers that could not be placed, when the solver can
    tell; `proven` is True when it is shown that no plan fits (a bound or an
    exact search), False when a solver only failed to find one.
    """

    def __init__(self, message: str, buffers: Iterable[str] = (), *, proven: bool = False) -> None:
        super().__init__(message)
        self.buffers = tuple(buffers)
        self.proven = proven

    def withdraw(self, reason: str) -> None:
        """Take the proof back, if it claims one: `proven` becomes False and the message says so, and why."""
        if self.proven:
            self.args = (f"not proven infeasible ({reason}); the solver said: {self.args[0]}", *self.args[1:])
            self.proven = False


class BankCapacityError(InfeasibleError):
    """A bank cannot hold what must go into it (or the banks cannot hold the program).

    `bank` names the bank and `missing` says how many bytes it lacks.
    """

    def __init__(
        self, message: str, bank: str, missing: int, buffers: Iterable[str] = (), *, proven: bool = False
    ) -> None:
        super().__init__(message, buffers, proven=proven)
        self.bank = bank
        self.missing = missing


class UnsupportedProblemError(ProblemError):
    """A solver was asked to honour a constraint it cannot honour; `capability` names it."""

    def __init__(self, message: str, capability: str = "") -> None:
        super().__init__(message)
        self.capability = capability


class InvalidPlanError(ProblemError):
    """A plan breaks its problem's constraints; `violations` lists them (see `problem.validate`)."""

    def __init__(self, message: str, violations: Iterable[Any] = ()) -> None:
        super().__init__(message)
        self.violations = tuple(violations)


class ExtractionError(ProblemError):
    """A graph cannot be turned into a Problem; the message names the node/tensor."""


class PlanningError(ProblemError):
    """Memory planning of a method cannot go on; the message names the method and the tensors."""


class SharedStatePolicyError(PlanningError):
    """The methods of one program disagree on how their shared mutable state is planned.

    Raised for a policy choice (`share_mutable_buffers`, foreign planners,
    memory ids), not for a graph extraction cannot read.
    """


class SolverOptionError(MemplanError, ValueError):
    """A solver name or option does not exist or is out of range; the message lists the valid ones."""


class UnknownSolverError(SolverOptionError):
    """The solver name is not registered."""


class SolverFailure(MemplanError, RuntimeError):
    """A solver or its backend failed in a way the input does not explain (a bug, a crashed binary)."""


class UsageError(MemplanError, ValueError):
    """A command, script or sweep asked for something that does not exist or cannot work; the message
    names the value and the valid choices (an unknown name, a bad setting, an unwritable output)."""


class ModelError(MemplanError):
    """The user's own model fails where memplan is not involved yet (torch.export of a method): the
    message names the model, the method and the user's own frame; the original error is the cause."""
