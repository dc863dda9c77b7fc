"""Shared fixtures: musa imported from the source tree, seeded per test."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))

import musa  # noqa: E402


@pytest.fixture(autouse=True)
def _seed():
    musa.manual_seed(0)
    yield
