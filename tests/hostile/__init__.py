"""The adversarial battery (see battery.py) and the mutation check (mutations.py); not
collected by pytest."""

import os
import sys

# The area tables import `hostile.mutations`, as pytest (tests/ is its rootdir's conftest
# folder) sees it; `python -m tests.hostile.mutations` from the repository root needs tests/ on
# the path for that too.
_TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)
