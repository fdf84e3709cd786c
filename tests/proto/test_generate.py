"""``python proto/generate.py``: the checked-in generated code equals a fresh run, and every
generated module carries its header and imports its siblings as ``hotjoin.proto.*``."""

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


def test_every_generated_module_says_how_it_was_made(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("generate", ROOT / "proto" / "generate.py")
    assert spec and spec.loader
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    fresh = gen.generate(tmp_path / "out")
    assert {f.name for f in fresh} == {"hotjoin_pb2.py", "hotjoin_pb2.pyi", "hotjoin_pb2_grpc.py"}
    for f in fresh:
        assert f.parent == tmp_path / "out" / "hotjoin" / "proto"
        assert f.read_text().startswith(gen.HEADER) and "# ruff: noqa" in gen.HEADER
    grpc_code = (tmp_path / "out" / gen.PACKAGE / "hotjoin_pb2_grpc.py").read_text()
    assert "\nfrom hotjoin.proto import hotjoin_pb2 as " in grpc_code, \
        "the service stubs import the messages as hotjoin.proto.*, with no editing after protoc"
