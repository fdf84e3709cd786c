"""Tests of the Spark replay (``ops/replay/``); a package, so that its test modules import under
names of their own (``tests/test_test_layout.py``)."""
