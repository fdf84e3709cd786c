"""Assemble and run one hotjoin server process: gRPC services, health, reflection, metrics.

``HotjoinServer`` is what ``hotjoin serve`` runs and what the end-to-end tests start in-process
(``port=0`` picks a free port). Listen streams each hold one worker thread while open, so
``max_workers`` bounds publishers + listeners served at once.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from matcher import Engine
from server import metrics
from server.registry import TopicRegistry
from server.service import add_services
from server.topic import CHECKPOINT_MIN_OPS, COMPACT_MIN_BYTES, COMPACT_RATIO, EngineFactory

log = logging.getLogger("hotjoin.server")

MAX_MESSAGE_BYTES = 256 * 1024 * 1024
GRPC_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.so_reuseport", 0),
]


class HotjoinServer:
    """One process: a topic registry behind the gRPC API, plus optional ``/metrics`` over HTTP."""

    def __init__(
        self,
        data_dir: Path | None = None,
        host: str = "127.0.0.1",
        port: int = 50051,
        metrics_port: int | None = None,
        max_workers: int = 64,
        buffer_capacity: int = 1024,
        engine_factory: EngineFactory = Engine,
        sync: bool = True,
        compact_min_bytes: int = COMPACT_MIN_BYTES,
        compact_ratio: float = COMPACT_RATIO,
        compact_all: bool = False,
        checkpoint_min_ops: int = CHECKPOINT_MIN_OPS,
    ) -> None:
        self.registry = TopicRegistry(
            data_dir, engine_factory, buffer_capacity=buffer_capacity, sync=sync,
            compact_min_bytes=compact_min_bytes, compact_ratio=compact_ratio, compact_all=compact_all,
            checkpoint_min_ops=checkpoint_min_ops,
        )
        self.host = host
        self._grpc = grpc.server(
            futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="hotjoin-rpc"),
            options=GRPC_OPTIONS,
        )
        names = add_services(self._grpc, self.registry)
        self.health = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self._grpc)
        reflection.enable_server_reflection(
            (*names, health.SERVICE_NAME, reflection.SERVICE_NAME), self._grpc
        )
        self._service_names = names
        self.port = self._grpc.add_insecure_port(f"{host}:{port}")
        if self.port == 0:
            raise OSError(f"cannot listen on {host}:{port}")
        self._collector = metrics.EngineCollector(self.registry.stats)
        self._metrics_port = metrics_port
        self._metrics_server: Any = None
        self.metrics_port: int | None = None
        self._stopped = threading.Event()

    @property
    def target(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> HotjoinServer:
        metrics.REGISTRY.register(self._collector)
        if self._metrics_port is not None:
            self._metrics_server = metrics.serve_metrics(self._metrics_port, self.host)
            self.metrics_port = self._metrics_server.server_port
        self._grpc.start()
        for name in ("", *self._service_names):
            self.health.set(name, health_pb2.HealthCheckResponse.SERVING)
        log.info("hotjoin serving on %s (metrics: %s)", self.target, self.metrics_port)
        return self

    def stop(self, grace: float = 1.0) -> None:
        """Stop accepting RPCs, end streams, close topics (their logs are already durable)."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        self.health.enter_graceful_shutdown()
        self.registry.close()
        self._grpc.stop(grace).wait()
        if self._metrics_server is not None:
            self._metrics_server.shutdown()
            self._metrics_server.server_close()
        with contextlib.suppress(KeyError):
            metrics.REGISTRY.unregister(self._collector)

    def wait(self) -> None:
        self._stopped.wait()
