"""Tests of the sub-commands (``cli/commands/``), one module per command module."""
