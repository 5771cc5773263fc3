"""The model zoo and any user program: `catalog` (entries by name), `models` (builders, one module per
family), `programs` (a zoo name, `.pt2` or `file.py:factory`; `plan_model`), `lowering` (a program
through `to_executorch`), `runtime` and `pte_check` (planned programs run against eager)."""

from memplan.experiments.zoo.catalog import UnknownModelError, ZooModel, get, names

__all__ = ["UnknownModelError", "ZooModel", "get", "names"]
