"""Test helper: one adapter over the blocking ``Client`` and the ``AsyncClient``, so that one test
body checks both (``tests/clients/conftest.py``'s ``api`` fixture)."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from hotjoin.clients import AsyncClient, Client


class Api:
    """Calls a ``Client`` or an ``AsyncClient`` alike: ``api.call("get_topic", "t")`` returns the
    result (awaited on the client's own event loop for the asyncio one); ``api.items(...)``
    collects an iterator (sync or async) up to and including the first item ``stop`` accepts."""

    def __init__(self, kind: str, target: str) -> None:
        self.kind = kind
        self.loop = asyncio.new_event_loop() if kind == "aio" else None
        self.client: Any = (Client(target, timeout=30) if kind == "sync"
                            else self._run(self._make_async(target)))

    async def _make_async(self, target: str) -> AsyncClient:
        return AsyncClient(target, timeout=30)

    def _run(self, coro: Any) -> Any:
        assert self.loop is not None
        return self.loop.run_until_complete(coro)

    def call(self, method: str, *args: Any, **kw: Any) -> Any:
        out = getattr(self.client, method)(*args, **kw)
        return self._run(out) if inspect.isawaitable(out) else out

    def items(self, method: str, *args: Any, stop: Any = None, limit: int = 1000, **kw: Any) -> list[Any]:
        it = getattr(self.client, method)(*args, **kw)
        if hasattr(it, "__aiter__"):
            async def collect() -> list[Any]:
                got: list[Any] = []
                try:
                    async for x in it:
                        got.append(x)
                        if (stop is not None and stop(x)) or len(got) >= limit:
                            break
                finally:
                    await it.aclose()
                return got

            return self._run(collect())  # type: ignore[no-any-return]
        got = []
        for x in it:
            got.append(x)
            if (stop is not None and stop(x)) or len(got) >= limit:
                break
        if hasattr(it, "cancel"):
            it.cancel()
        return got

    def close(self) -> None:
        if self.kind == "aio":
            self._run(self.client.close())
            assert self.loop is not None
            self.loop.close()
        else:
            self.client.close()
