"""The audit trail: one JSON line per security-relevant event, on the logger ``hotjoin.audit``.

Recorded: topic creation and deletion, subscription registration and cancellation (every
outcome), authentication failures, permission denials and auth-file reloads. Each line has
``ts`` (UTC, ISO 8601), ``action``, ``principal`` (``null`` when unauthenticated, ``anonymous``
without ``--auth-file``) and ``outcome`` (``ok``, ``denied``, ``unauthenticated``, ``error``),
plus what the action was about (topic, subscription ids, peer, gRPC code, reason). Never a token
or a token hash: callers pass only names, ids and messages that contain none.

``hotjoin serve --audit-log FILE`` writes the lines (bare JSON) to FILE instead of the server's
log; otherwise they go through the root logger like every other log line.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
from pathlib import Path
from typing import Any

AUDIT = logging.getLogger("hotjoin.audit")
AUDIT.setLevel(logging.INFO)


def record(action: str, principal: str | None, outcome: str, **fields: Any) -> None:
    """Log one audit line; ``fields`` that are None are left out."""
    if not AUDIT.isEnabledFor(logging.INFO):
        return
    rec: dict[str, Any] = {
        "ts": _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds"),
        "action": action,
        "principal": principal,
        "outcome": outcome,
    }
    rec.update((k, v) for k, v in fields.items() if v is not None)
    AUDIT.info(json.dumps(rec, separators=(",", ":"), default=str))


class AuditFile:
    """Send the audit lines to ``path`` (appended, one JSON object per line) until ``close``."""

    def __init__(self, path: Path) -> None:
        self.handler = logging.FileHandler(path, encoding="utf-8")
        self.handler.setFormatter(logging.Formatter("%(message)s"))
        AUDIT.addHandler(self.handler)
        self._propagate = AUDIT.propagate
        AUDIT.propagate = False

    def close(self) -> None:
        AUDIT.removeHandler(self.handler)
        AUDIT.propagate = self._propagate
        self.handler.close()
