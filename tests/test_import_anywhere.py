"""`import memplan` from any folder, including the one that holds a checkout named `memplan`.

Python searches the current folder first; a checkout folder named `memplan` must not shadow the
installed package (it did, as an empty namespace package). Each import runs in a fresh interpreter.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CHECKOUT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())
PROBE = (  # without torch: PlannerPass is one of the front door's lazy names, loaded from memplan.planner
    "import memplan, memplan.planner; from memplan import Problem, solve;"
    " print(memplan.__file__); print(memplan._LAZY['PlannerPass'][0]); print(memplan.planner.__file__)"
)


def _import_in(folder: Path) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=folder, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.splitlines()


def test_import_from_the_folder_holding_a_checkout_named_memplan(tmp_path):
    (tmp_path / "memplan").symlink_to(CHECKOUT, target_is_directory=True)
    (tmp_path / "shared").mkdir()  # the README's layout: data beside the checkout
    where, pass_module, planner = _import_in(tmp_path)
    assert Path(where).resolve() == CHECKOUT / "memplan" / "__init__.py"
    assert pass_module.startswith("memplan.planner.")
    assert Path(planner).resolve() == CHECKOUT / "planner" / "__init__.py"


def test_import_from_an_unrelated_folder(tmp_path):
    where, _, _ = _import_in(tmp_path)
    assert Path(where).name == "__init__.py" and Path(where).parent.name == "memplan"
