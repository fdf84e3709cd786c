"""Assemble and run one hotjoin server process: gRPC services, health, reflection, metrics.

``HotjoinServer`` is what ``hotjoin serve`` runs and what the end-to-end tests start in-process
(``port=0`` picks a free port). gRPC runs on asyncio (``grpc.aio``) in a thread of its own:
``Listen`` and the client-streaming RPCs are coroutines on that one event loop, so an open
stream holds no thread, and a batch handed to many listeners costs no thread switch per
listener; the unary RPCs run in a pool of ``max_workers`` threads (publishers and other calls
served at once).

Security (docs/how-to/security.md): loopback by default; ``tls=TlsFiles(...)`` serves TLS (mutual
TLS with a client CA); ``auth_file`` turns on bearer-token authentication and per-topic rights
(``reload_auth`` re-reads it, on SIGHUP in ``hotjoin serve``); ``limits`` sets the quotas.
Binding a non-loopback address without both TLS and auth is refused unless ``allow_insecure``.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
import threading
import time
from collections.abc import Coroutine
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from hotjoin.matcher import Engine
from hotjoin.matcher.warmup import warm_up_in_background
from hotjoin.server import audit, malloc, metrics
from hotjoin.server.auth import Authenticator, AuthFileError
from hotjoin.server.interceptor import GuardInterceptor
from hotjoin.server.kernels import warm_up_server
from hotjoin.server.quotas import Limits, Quotas
from hotjoin.server.registry import TopicRegistry
from hotjoin.server.rpc_metrics import RpcMetricsInterceptor
from hotjoin.server.service import add_services
from hotjoin.server.settings import (
    CHECKPOINT_MIN_OPS,
    COMPACT_MIN_BYTES,
    COMPACT_RATIO,
    DeliveryOptions,
    EngineFactory,
    TopicSettings,
)

log = logging.getLogger("hotjoin.server")
T = TypeVar("T")

MAX_MESSAGE_BYTES = 256 * 1024 * 1024
SHUTDOWN_DRAIN_SECONDS = 0.5  # in-flight unary batches finish before the topics close
GRPC_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.so_reuseport", 0),
]


@dataclass(frozen=True)
class TlsFiles:
    """PEM files of the server's TLS: certificate chain and key; with ``client_ca``, clients
    must present a certificate signed by it (mutual TLS)."""

    cert: Path
    key: Path
    client_ca: Path | None = None

    def credentials(self) -> grpc.ServerCredentials:
        try:
            cert, key = self.cert.read_bytes(), self.key.read_bytes()
            ca = self.client_ca.read_bytes() if self.client_ca is not None else None
        except OSError as e:
            raise ValueError(f"cannot read TLS file {e.filename}: {e.strerror}") from None
        return grpc.ssl_server_credentials([(key, cert)], root_certificates=ca,
                                           require_client_auth=ca is not None)


def is_loopback(host: str) -> bool:
    """True when every address ``host`` resolves to is a loopback address."""
    h = host.strip("[]")
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(h, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(i[4][0].split("%")[0]).is_loopback for i in infos)


class _ClientGone(logging.Filter):
    """gRPC's asyncio server logs a write to a stream whose client has just gone away as an
    error with a traceback when the write fails before it has seen the cancellation. For a
    server of long-lived Listen streams that is routine, not an error: such records are dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("ExecuteBatchError raised in core")


logging.getLogger("grpc._cython.cygrpc").addFilter(_ClientGone())


class EventLoopThread:
    """An asyncio event loop running in a daemon thread of its own: where gRPC's asyncio server
    and its streams live, driven from ordinary threads through ``call``."""

    def __init__(self, name: str = "hotjoin-grpc") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coro: Coroutine[Any, Any, T]) -> futures.Future[T]:
        """Run ``coro`` on the loop; its future."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and wait for its result."""
        return self.submit(coro).result(timeout)

    def close(self) -> None:
        """Stop the loop (after what it runs has ended) and release it."""
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5.0)
        if not self._thread.is_alive():
            self.loop.close()


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
        tls: TlsFiles | None = None,
        auth_file: Path | None = None,
        limits: Limits | None = None,
        audit_log: Path | None = None,
        allow_insecure: bool = False,
        metrics_host: str | None = None,
        delivery: DeliveryOptions | None = None,
    ) -> None:
        self.tls = tls
        creds = tls.credentials() if tls is not None else None  # fail before opening any topic
        self.authenticator = Authenticator(auth_file) if auth_file is not None else None
        quota_limits = (limits or Limits.for_workers(max_workers)).validate()
        insecure = [w for w, off in (("TLS", tls is None), ("authentication", auth_file is None)) if off]
        if insecure and not is_loopback(host):
            what = " and ".join(insecure)
            if not allow_insecure:
                raise ValueError(
                    f"refusing to listen on non-loopback address {host!r} without {what}: pass "
                    "--tls-cert/--tls-key and --auth-file, or --allow-insecure to accept the risk")
            log.warning("!!! INSECURE: listening on %s without %s: anyone who can reach this "
                        "address can %s. See docs/how-to/security.md. !!!", host, what,
                        "read and change every topic" if auth_file is None else "read the traffic, tokens included")
        self.settings = TopicSettings(
            engine_factory=engine_factory, buffer_capacity=buffer_capacity, sync=sync,
            compact_min_bytes=compact_min_bytes, compact_ratio=compact_ratio, compact_all=compact_all,
            checkpoint_min_ops=checkpoint_min_ops, delivery=delivery or DeliveryOptions(),
        )
        self.registry = TopicRegistry(data_dir, self.settings)  # DataDirInUse: another holds it
        try:
            self.host = host
            self.quotas = Quotas(quota_limits, owned=self.registry.owned)
            transport_max = max(MAX_MESSAGE_BYTES, self.quotas.limits.message_bytes)
            options = [(k, transport_max if k.startswith("grpc.max_") else v) for k, v in GRPC_OPTIONS]
            self._pool = futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="hotjoin-rpc")
            self._loop = EventLoopThread()
            address = f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"
            try:
                self._grpc, self.health, self._service_names, self.port = self._loop.call(
                    self._build(options, address, creds))
                if self.port == 0:
                    raise OSError(f"cannot listen on {host}:{port}")
            except BaseException:
                self._loop.close()
                self._pool.shutdown(wait=False)
                raise
        except BaseException:
            self.registry.close()  # the data directory's lock goes with it
            raise
        self._collector = metrics.EngineCollector(self.registry.stats, self.registry.data_dir)
        self._metrics_port = metrics_port
        self._metrics_host = metrics_host or host
        self._metrics_server: Any = None
        self.metrics_port: int | None = None
        self._stopped = threading.Event()
        self._warm_up: threading.Thread | None = None
        self._audit_file = audit.AuditFile(audit_log) if audit_log is not None else None

    async def _build(self, options: list[tuple[str, Any]], address: str,
                     creds: grpc.ServerCredentials | None) -> tuple[grpc.aio.Server, Any, list[str], int]:
        """The asyncio gRPC server with every service, health and reflection (built on the loop
        it will run on). Blocking work of the streams runs in the same pool as the unary RPCs."""
        asyncio.get_running_loop().set_default_executor(self._pool)
        server = grpc.aio.server(
            migration_thread_pool=self._pool, options=options,
            interceptors=[RpcMetricsInterceptor(), GuardInterceptor(self.authenticator, self.quotas)],
        )
        names = add_services(server, self.registry, self.quotas)
        checker = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(checker, server)
        reflection.enable_server_reflection((*names, health.SERVICE_NAME, reflection.SERVICE_NAME), server)
        port = server.add_insecure_port(address) if creds is None else server.add_secure_port(address, creds)
        return server, checker, names, port

    async def _serving(self) -> None:
        await self._grpc.start()
        for name in ("", *self._service_names):
            await self.health.set(name, health_pb2.HealthCheckResponse.SERVING)

    @property
    def target(self) -> str:
        host = f"[{self.host}]" if ":" in self.host and not self.host.startswith("[") else self.host
        return f"{host}:{self.port}"

    def start(self) -> HotjoinServer:
        malloc.tune()  # large buffers reused, not mapped afresh (server/malloc.py)
        # kernels load now, not on first use: the engine's, then delivery's and the wire's
        self._warm_up = warm_up_in_background(log, then=warm_up_server)
        metrics.REGISTRY.register(self._collector)
        if self._metrics_port is not None:
            self._metrics_server = metrics.serve_metrics(self._metrics_port, self._metrics_host)
            self.metrics_port = self._metrics_server.server_port
        self._loop.call(self._serving())
        log.info("hotjoin serving on %s (metrics: %s, TLS: %s, auth: %s)", self.target, self.metrics_port,
                 "off" if self.tls is None else ("mutual" if self.tls.client_ca else "on"),
                 "off" if self.authenticator is None else
                 f"{len(self.authenticator.principals)} principals from {self.authenticator.path}")
        return self

    def reload_auth(self) -> bool:
        """Re-read the auth file (SIGHUP); a bad file is logged and the current one kept."""
        if self.authenticator is None:
            log.info("reload requested, but the server runs without --auth-file")
            return False
        try:
            table = self.authenticator.reload()
        except AuthFileError as e:
            metrics.AUTH_RELOADS.labels("error").inc()
            audit.record("auth.reload", None, "error", reason=str(e))
            log.error("auth file reload failed, keeping the previous one: %s", e)
            return False
        metrics.AUTH_RELOADS.labels("ok").inc()
        audit.record("auth.reload", None, "ok", principals=len(table.principals))
        log.info("auth file %s reloaded: %d principals", self.authenticator.path, len(table.principals))
        return True

    def stop(self, grace: float = 1.0) -> None:
        """Graceful stop (docs/reference/errors.md): refuse new RPCs at once (UNAVAILABLE, health
        NOT_SERVING), give in-flight batches a short drain to finish, then close the topics —
        what is still running gets UNAVAILABLE (retryable; never NOT_FOUND), listeners end with
        UNAVAILABLE "the server is shutting down" — and cancel whatever remains after ``grace``."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        self._loop.call(self.health.enter_graceful_shutdown())
        done = self._loop.submit(self._grpc.stop(grace))  # no new RPCs from here on; running ones continue
        time.sleep(min(SHUTDOWN_DRAIN_SECONDS, grace / 4))
        self.registry.close()
        with contextlib.suppress(futures.TimeoutError, asyncio.CancelledError):
            done.result(grace + 1.0)
        self._loop.close()
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._warm_up is not None:  # not mid-compile when the interpreter exits
            self._warm_up.join(grace)
        if self._metrics_server is not None:
            self._metrics_server.shutdown()
            self._metrics_server.server_close()
        with contextlib.suppress(KeyError):
            metrics.REGISTRY.unregister(self._collector)
        if self._audit_file is not None:
            self._audit_file.close()

    def wait(self) -> None:
        self._stopped.wait()
