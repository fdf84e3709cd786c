"""Generated protobuf and gRPC code of ``proto/hotjoin/v1`` (see proto/generate.py)."""
