"""This checkout, imported as `memplan` from the folder that holds it: it hands over to the package inside.

Python looks in the current folder before the installed package, and the editable install's finder
comes after that search (setuptools appends it to `sys.meta_path`). A checkout folder named `memplan`
without this file would be taken for a namespace package and shadow memplan (`from memplan import
PlannerPass` fails); with it, `import memplan` loads this checkout's `memplan/__init__.py`, its layers
(`planner/`, `solvers/`, ...) found beside it, as the installed package maps them. Anywhere else this
file is never imported.
"""

import importlib.util
import sys
from pathlib import Path

_checkout = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location(
    __name__,
    _checkout / "memplan" / "__init__.py",
    submodule_search_locations=[str(_checkout / "memplan"), str(_checkout)],
)
assert _spec is not None and _spec.loader is not None
_package = importlib.util.module_from_spec(_spec)
sys.modules[__name__] = _package  # the import system returns what is registered under the name
_spec.loader.exec_module(_package)
