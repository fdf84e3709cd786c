"""Per-tuple cost models of every strategy (paper 004 §4.1, §4.2, Theorems 2–4) and their profile.

A strategy's cost for one incoming tuple is ``Σ_j c_j · f_j``: fitted constants ``c_j`` (the
paper's α, β, γ, δ; Table II) times features ``f_j`` computed from exact quantities (|S|, |Q|, τ,
hotspot sizes, the key's partner count m′) and estimated ones (n′, n″ from interval histograms;
m_b, m̄_b per join key for window joins). ``FEATURES`` names them once; the router evaluates them
per tuple (:mod:`matcher.router`) and ``hotjoin calibrate`` fits the constants
(:mod:`matcher.calibrate`). Deviations from the paper, all to model what the code really does:

* every formula has a constant term ``1`` (per-call dispatch, the same order of magnitude as a
  probe here: ~1–5 µs against the paper's C++);
* ``lg x`` is ``log2(x + 2)`` so that empty tables and one-element groups cost something finite;
* SJ-Hotspot's scattered part is ``x (c + c′ lg m′)`` with ``x = min(τ_S, sf·n″)``: the code
  (``select_join.Hotspot``) probes either the scattered stabbing groups (a root test each, then
  a search of the m′ partners) or SJ-SelectFirst, whichever is cheaper; n″ is
  estimated as n′ · |Q_S| / |Q| (one histogram lookup instead of a second histogram, §4.1);
* BJ-Hotspot's scattered part is ``min(n_s lg m, n_s + m)`` for the same reason (BJ-QOuter or
  BJ-MJ per tuple, ``band_join.Hotspot``);
* g₂(n) = √n and g₃(n) = n^(2/3), the lower bounds for R-tree stabbing the paper uses for g₂.

The output cost k is the same for every strategy and is left out of the routing formulas, as in
the paper; calibration regresses on it as an extra term so that it does not bias the others.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FEATURES: dict[str, tuple[str, ...]] = {
    # §4.1 (select joins), incoming tuple of side X against the other side's table "S"
    "SJ-JoinFirst": ("1", "lg|S|", "m'·√|Q|"),
    "SJ-SelectFirst": ("1", "lg|S|", "lg|Q|", "n'·lg m'"),
    "SJ-Vanilla": ("1", "lg|S|", "|Q|·lg m'"),
    "SJ-Hotspot": ("1", "lg|S|", "lg|Q_S|", "min(τ_S, sf·n'')", "min(τ_S, sf·n'')·lg m'",
                   "Σ√|Q_i^H|"),
    "SJ-SSI": ("1", "lg|S|", "τ·lg m'", "√(|Q|·τ)"),
    # Theorem 2 (band joins)
    "BJ-QOuter": ("1", "n·lg m"),
    "BJ-DOuter": ("1", "m·lg n"),
    "BJ-MJ": ("1", "m + n"),
    "BJ-SSI": ("1", "τ·lg m"),
    "BJ-Hotspot": ("1", "H·lg m", "min(n_s·lg m, n_s + m)"),
    # Theorem 4 and §4.2 (window joins)
    "WJ-JoinFirst": ("1", "lg m", "m_b·g3(n)"),
    "WJ-SelectFirst": ("1", "lg n", "lg m", "n'·g2(m')"),
    "WJ-SSI": ("1", "lg m", "m'_b", "m̄_b·g3(n)"),
    "WJ-Hotspot": ("1", "lg m", "m'_b", "m̄_b·g3(n_H)", "n''·g2(m')"),
}
KIND_OF = {name: {"SJ": "select", "BJ": "band", "WJ": "window"}[name[:2]] for name in FEATURES}

SHIPPED_PROFILE = Path(__file__).with_name("profiles") / "default.json"
"""The profile fitted on the development machine (2 shared cores) by ``hotjoin calibrate``."""
USER_PROFILE = Path(os.environ.get("XDG_CONFIG_HOME", Path.home() / ".config")) / "hotjoin" \
    / "profile.json"
"""Where ``hotjoin calibrate`` writes by default and where the engine looks first."""


def lg(x: float) -> float:
    """``log2(x + 2)``: finite and ≥ 1 for every count x ≥ 0."""
    return math.log2(x + 2.0)


def g2(n: float) -> float:
    """Stabbing cost of an R-tree over n rectangles (§4.1 takes √n)."""
    return math.sqrt(n)


def g3(n: float) -> float:
    """Stabbing cost of an R-tree over n 3-d boxes (the analogous lower bound n^(2/3))."""
    return n ** (2.0 / 3.0)


@dataclass
class CostProfile:
    """Fitted constants per strategy (same order as ``FEATURES``), with 95% intervals."""

    coef: dict[str, list[float]]
    ci: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    source: str = "built-in"

    def __post_init__(self) -> None:
        for name, c in self.coef.items():
            if name not in FEATURES:
                raise ValueError(f"cost profile names an unknown strategy {name!r}")
            if len(c) != len(FEATURES[name]):
                raise ValueError(f"cost profile for {name} has {len(c)} constants, "
                                 f"expected {len(FEATURES[name])} ({', '.join(FEATURES[name])})")
            if any(not math.isfinite(x) or x < 0 for x in c):
                raise ValueError(f"cost profile for {name}: constants must be finite and >= 0")

    def constants(self, name: str) -> list[float]:
        """The constants of ``name``; a strategy missing from the profile uses the built-ins."""
        c = self.coef.get(name)
        return list(c) if c is not None else list(BUILTIN_COEF[name])

    def cost(self, name: str, features: tuple[float, ...] | list[float]) -> float:
        return sum(c * f for c, f in zip(self.constants(name), features, strict=True))

    def to_json(self) -> dict[str, Any]:
        return {
            "format": "hotjoin-cost-profile/1",
            "unit": "ns",
            "features": {k: list(FEATURES[k]) for k in self.coef},
            "coef": self.coef,
            "ci95": {k: [list(x) for x in v] for k, v in self.ci.items()},
            "meta": self.meta,
        }

    def save(self, path: str | Path) -> None:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_suffix(p.suffix + ".tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=1, sort_keys=True) + "\n")
        tmp.replace(p)

    @classmethod
    def load(cls, path: str | Path) -> CostProfile:
        """Read a profile written by ``hotjoin calibrate`` (ValueError says what is wrong)."""
        p = Path(path)
        try:
            doc = json.loads(p.read_text())
        except FileNotFoundError:
            raise ValueError(f"cost profile {p} does not exist") from None
        except json.JSONDecodeError as e:
            raise ValueError(f"cost profile {p} is not valid JSON: {e}") from None
        if not isinstance(doc, dict) or doc.get("format") != "hotjoin-cost-profile/1":
            raise ValueError(f"cost profile {p} is not a hotjoin-cost-profile/1 document")
        feats = doc.get("features", {})
        for name in doc.get("coef", {}):
            if name in feats and tuple(feats[name]) != FEATURES.get(name):
                raise ValueError(f"cost profile {p} was fitted for other features of {name}; "
                                 "run `hotjoin calibrate` again")
        ci = {k: [tuple(x) for x in v] for k, v in doc.get("ci95", {}).items()}
        return cls({k: [float(x) for x in v] for k, v in doc["coef"].items()}, ci,
                   doc.get("meta", {}), str(p))


# Fallback constants (ns) used when neither the shipped nor a user profile has a strategy. They
# are rough per-operation costs of the numba kernels on one core of the development machine.
BUILTIN_COEF: dict[str, tuple[float, ...]] = {
    "SJ-JoinFirst": (3000.0, 30.0, 8.0),
    "SJ-SelectFirst": (3000.0, 30.0, 40.0, 25.0),
    "SJ-Vanilla": (3000.0, 30.0, 4.0),
    "SJ-Hotspot": (4000.0, 30.0, 40.0, 10.0, 4.0, 3.0),
    "SJ-SSI": (3500.0, 30.0, 4.0, 1.0),
    "BJ-QOuter": (3000.0, 2.0),
    "BJ-DOuter": (3000.0, 10.0),
    "BJ-MJ": (3000.0, 1.5),
    "BJ-SSI": (3000.0, 6.0),
    "BJ-Hotspot": (3500.0, 6.0, 2.0),
    "WJ-JoinFirst": (3000.0, 30.0, 10.0),
    "WJ-SelectFirst": (3000.0, 40.0, 30.0, 20.0),
    "WJ-SSI": (3500.0, 30.0, 5.0, 10.0),
    "WJ-Hotspot": (4000.0, 30.0, 5.0, 10.0, 20.0),
}


_CACHE: dict[tuple[str, int], CostProfile] = {}


def _load_cached(path: Path) -> CostProfile:
    """``CostProfile.load`` once per file version (every "auto" engine asks; topics are many)."""
    try:
        key = (str(path), path.stat().st_mtime_ns)
    except OSError:
        return CostProfile.load(path)  # raises the clear "does not exist" error
    prof = _CACHE.get(key)
    if prof is None:
        prof = _CACHE[key] = CostProfile.load(path)
    return prof


def load_profile(path: str | Path | None = None) -> CostProfile:
    """The profile the engine uses: ``path`` if given, else ``$HOTJOIN_PROFILE``, else the user's
    (``~/.config/hotjoin/profile.json``), else the shipped default, else the built-ins.

    A user profile overrides the shipped one strategy by strategy (strategies it does not name
    keep the shipped constants).
    """
    if path is not None:
        return _load_cached(Path(path))
    base = _load_cached(SHIPPED_PROFILE) if SHIPPED_PROFILE.exists() else CostProfile(
        {k: list(v) for k, v in BUILTIN_COEF.items()})
    env = os.environ.get("HOTJOIN_PROFILE")
    user = Path(env) if env else USER_PROFILE
    if env or user.exists():
        mine = _load_cached(user)
        coef = {**base.coef, **mine.coef}
        ci = {**base.ci, **mine.ci}
        return CostProfile(coef, ci, {**base.meta, "user": mine.meta}, f"{base.source} + {user}")
    return base
