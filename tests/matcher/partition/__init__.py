"""Tests of the interval histograms, the stabbing partition and the hotspot tracker
(``matcher/partition/``); a package, so that its test modules import under names of their own
(``tests/test_test_layout.py``)."""
