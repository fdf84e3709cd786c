"""The wire: ``hotjoin.v1`` messages and service stubs generated from ``proto/hotjoin/v1/``.

Server and clients import the generated code from here only (``python proto/generate.py``
regenerates it; a test keeps it in sync):

>>> from hotjoin.proto import hotjoin_pb2 as pb
>>> pb.Range(lo=1.0).HasField("hi")
False
"""
