"""Shared fixtures: musa imported from the source tree, seeded per test."""
import os
import sys

import pytest

# the source tree's package, unless PYTHONPATH names a folder holding one
# (an ASan build's build-asan/python: docs/fuzzing.md)
if not any(os.path.isfile(os.path.join(d, "musa", "__init__.py"))
           for d in os.environ.get("PYTHONPATH", "").split(os.pathsep) if d):
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))

import musa  # noqa: E402


@pytest.fixture(autouse=True)
def _seed():
    musa.manual_seed(0)
    yield
