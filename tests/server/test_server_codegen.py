"""The checked-in generated code equals a fresh ``python proto/generate.py`` run."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_generated_code_is_fresh(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("generate", ROOT / "proto" / "generate.py")
    assert spec and spec.loader
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    fresh = gen.generate(tmp_path)
    assert fresh, "protoc produced nothing"
    for f in fresh:
        checked_in = ROOT / "proto" / f.name
        assert checked_in.exists(), f"{checked_in} missing: run python proto/generate.py"
        assert checked_in.read_text() == f.read_text(), f"{checked_in} is stale: run python proto/generate.py"
