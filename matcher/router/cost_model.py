"""Per-tuple cost models of every strategy (paper 004 §4.1, §4.2, Theorems 2–4) and their profile.

A strategy's cost for one incoming tuple is ``Σ_j c_j · f_j``: fitted constants ``c_j`` (the
paper's α, β, γ, δ; Table II) times features ``f_j`` computed from exact quantities (|S|, |Q|, τ,
hotspot sizes, the key's partner count m′) and estimated ones (n′, n″ from interval histograms;
m_b, m̄_b per join key for window joins). Each strategy's model is written once, as one
:class:`CostModel` object in ``MODELS`` that names its features (``terms``; ``FEATURES`` collects
them), computes them (``features``) and folds its constants into the plan the router's per-tuple
loop reads (``plan``). The router (:mod:`matcher.router.dynamic`) evaluates them per tuple,
``hotjoin calibrate`` (:mod:`matcher.router.calibrate`) fits the constants on the same features,
and the tests check plan against features. Deviations from the paper, all to model what the
code really does:

* every formula has a constant term ``1`` (per-call dispatch, the same order of magnitude as a
  probe here: ~1–5 µs against the paper's C++);
* ``lg x`` is ``log2(x + 2)`` so that empty tables and one-element groups cost something finite;
* SJ-Hotspot's scattered part is ``x (c + c′ lg m′)`` with ``x = min(τ_S, sf·n″)``: the code
  (``joins.select.Hotspot``) probes either the scattered stabbing groups (a root test each, then
  a search of the m′ partners) or SJ-SelectFirst, whichever is cheaper; n″ is
  estimated as n′ · |Q_S| / |Q| (one histogram lookup instead of a second histogram, §4.1);
* BJ-Hotspot's scattered part is ``min(n_s lg m, n_s + m)`` for the same reason (BJ-QOuter or
  BJ-MJ per tuple, ``joins.band.Hotspot``);
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
from typing import Any, NamedTuple

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


# -- the quantities a model reads ----------------------------------------------------------------


class BandQuantities(NamedTuple):
    """Theorem 2's inputs for one incoming band tuple: |Q| (n) and the other side's |S| (m)."""

    n: float
    m: float


class IntervalQuantities(NamedTuple):
    """An interval join's inputs for one incoming tuple: |Q| (n) and the other side's |S| (m);
    as Theorem 2's, the same for every tuple."""

    n: float
    m: float


class SelectQuantities(NamedTuple):
    """§4.1's inputs for one incoming select tuple of direction ``d``: |S|, |Q|, the key's
    partner count m′ and the estimate n′(v). A plan reads only the slowly moving ones (d, |S|,
    |Q|); m′ and n′ vary per tuple."""

    d: int
    s: float
    q: float
    m1: float
    n1: float


class WindowQuantities(NamedTuple):
    """§4.2's inputs for one incoming window tuple of direction ``d`` and key ``b``: |S| (m),
    |Q| (n), the key's partners m′, those within w_max of the tuple's time m_b, and n′(v)."""

    d: int
    b: float
    m: float
    n: float
    mp: float
    mb: float
    n1: float


SelectPlan = tuple[int, float, float, Any]
"""``(code, A, K, extra)``: the cost of a tuple is ``A + K · term`` with the per-tuple term
``code`` 0: m′, 1: n′ · lg m′, 2: lg m′, 3: ``min(τ_S, f · n′) · (c₃ + c₄ lg m′)`` with
``extra = (τ_S, f, c₃, c₄)`` (K = 1), 4: n′ plus ``extra · m′``. The router evaluates it per
tuple in compiled code (``choice_kernels.member_cost``)."""
WindowPlan = tuple[int, float, float, float, float, float]
"""``(code, A, K, K2, K3, τ)``: the cost of a tuple is, by ``code``, 0: ``A + K · m_b``;
1: ``A + K · n′ · √m′``; 2, 3: ``A + K · m′_b + K2 · m̄_b (+ K3 · n′ · √m′)``, with m̄_b and m′_b
from the member's skyline of the key (:func:`skyline_sizes`, τ its stabbing number)."""


def fresh_skyline(sky: Any, b: float) -> float:
    """The size of key ``b``'s stored skyline in ``sky`` (a ``SkylineIndex``) if it is current,
    else −1 (it is recomputed in one pass over the key's partners). O(1)."""
    return sky.fresh_size(b)


def skyline_sizes(fresh: float, mb: float, mp: float, tau: float) -> tuple[float, float]:
    """(m̄_b, m′_b) of WJ-SSI / WJ-Hotspot (§4.2) from :func:`fresh_skyline`'s answer: the
    skyline's size and twice it when current, else ``min(m_b, 2τ)`` and m′."""
    if fresh >= 0.0:
        return fresh, 2.0 * fresh
    return min(mb, 2.0 * tau), mp


# -- one model per strategy ----------------------------------------------------------------------


class CostModel:
    """One strategy's per-tuple cost model (§4): ``terms`` names its features, ``features``
    computes them from the tuple's quantities and the member's index, ``plan`` (select and
    window joins) folds fitted constants and the slowly moving quantities into the few numbers
    the router's per-tuple loop reads. Cost = ``Σ c_j · features_j``."""

    name = ""
    terms: tuple[str, ...] = ()

    def features(self, member: Any, x: Any) -> list[float]:
        """The feature vector (``terms`` order) of ``member`` for quantities ``x``."""
        raise NotImplementedError

    def cost(self, c: list[float], member: Any, x: Any) -> float:
        """``Σ c_j · features_j`` (ns with a fitted profile)."""
        return sum(ci * fi for ci, fi in zip(c, self.features(member, x), strict=True))


class BJQOuter(CostModel):
    """Theorem 2: n searches of the key order, O(n log m)."""

    name, terms = "BJ-QOuter", ("1", "n·lg m")

    def features(self, member: Any, x: BandQuantities) -> list[float]:
        return [1.0, x.n * lg(x.m)]


class BJDOuter(CostModel):
    """Theorem 2: m probes of an interval tree, O(m log n)."""

    name, terms = "BJ-DOuter", ("1", "m·lg n")

    def features(self, member: Any, x: BandQuantities) -> list[float]:
        return [1.0, x.m * lg(x.n)]


class BJMJ(CostModel):
    """Theorem 2: one merge, O(n + m)."""

    name, terms = "BJ-MJ", ("1", "m + n")

    def features(self, member: Any, x: BandQuantities) -> list[float]:
        return [1.0, x.m + x.n]


class BJSSI(CostModel):
    """Theorem 2: τ searches of the key order, O(τ log m)."""

    name, terms = "BJ-SSI", ("1", "τ·lg m")

    def features(self, member: Any, x: BandQuantities) -> list[float]:
        return [1.0, member.tau() * lg(x.m)]


class BJHotspot(CostModel):
    """BJ-SSI on the H hotspots plus the cheaper of BJ-QOuter and BJ-MJ on n_s scattered."""

    name, terms = "BJ-Hotspot", ("1", "H·lg m", "min(n_s·lg m, n_s + m)")

    def features(self, member: Any, x: BandQuantities) -> list[float]:
        lgm = lg(x.m)
        ns = float(member.n_scattered())
        return [1.0, member.hot_groups() * lgm, min(ns * lgm, ns + x.m) if ns else 0.0]


class SJJoinFirst(CostModel):
    """§4.1: m′ probes of the R-tree on A × C, each ~√|Q|."""

    name, terms = "SJ-JoinFirst", ("1", "lg|S|", "m'·√|Q|")

    def features(self, member: Any, x: SelectQuantities) -> list[float]:
        return [1.0, lg(x.s), x.m1 * math.sqrt(x.q)]

    def plan(self, c: list[float], member: Any, x: SelectQuantities) -> SelectPlan:
        return 0, c[0] + c[1] * lg(x.s), c[2] * math.sqrt(x.q), None


class SJSelectFirst(CostModel):
    """§4.1 with this code's index: τ_own group scans, a bucket table over the key's m′
    partners, then n′ selected subscriptions tested in two loads each (``OwnRangeIndex``)."""

    name, terms = "SJ-SelectFirst", ("1", "lg|S|", "τ_own", "m'", "n'")

    def features(self, member: Any, x: SelectQuantities) -> list[float]:
        return [1.0, lg(x.s), float(member.tau(x.d)), x.m1, x.n1]

    def plan(self, c: list[float], member: Any, x: SelectQuantities) -> SelectPlan:
        return 4, c[0] + c[1] * lg(x.s) + c[2] * float(member.tau(x.d)), c[4], c[3]


class SJVanilla(CostModel):
    """§4.1: every subscription searches the key's m′ partners."""

    name, terms = "SJ-Vanilla", ("1", "lg|S|", "|Q|·lg m'")

    def features(self, member: Any, x: SelectQuantities) -> list[float]:
        return [1.0, lg(x.s), x.q * lg(x.m1)]

    def plan(self, c: list[float], member: Any, x: SelectQuantities) -> SelectPlan:
        return 2, c[0] + c[1] * lg(x.s), c[2] * x.q, None


class SJSSI(CostModel):
    """§3.2.2: τ group probes, each a search of the m′ partners and an R-tree stab."""

    name, terms = "SJ-SSI", ("1", "lg|S|", "τ·lg m'", "√(|Q|·τ)")

    def features(self, member: Any, x: SelectQuantities) -> list[float]:
        tau = float(member.tau(x.d))
        return [1.0, lg(x.s), tau * lg(x.m1), math.sqrt(x.q * max(tau, 1.0))]

    def plan(self, c: list[float], member: Any, x: SelectQuantities) -> SelectPlan:
        tau = float(member.tau(x.d))
        return 2, c[0] + c[1] * lg(x.s) + c[3] * math.sqrt(x.q * max(tau, 1.0)), c[2] * tau, None


class SJHotspot(CostModel):
    """§3.2.3/§4.1: the hot groups' R-trees (Σ√|Q_i^H|), then on the scattered part the cheaper
    of τ_S group probes and sf · n″ SelectFirst rows, n″ ≈ n′ · |Q_S| / |Q|."""

    name = "SJ-Hotspot"
    terms = ("1", "lg|S|", "lg|Q_S|", "min(τ_S, sf·n'')", "min(τ_S, sf·n'')·lg m'",
             "Σ√|Q_i^H|")

    def features(self, member: Any, x: SelectQuantities) -> list[float]:
        ns, tau_s = member.scattered_sizes(x.d)
        n2 = x.n1 * ns / x.q if x.q else 0.0
        scat = min(tau_s, member.sf_cost * n2) if ns else 0.0
        return [1.0, lg(x.s), lg(ns), scat, scat * lg(x.m1), member.hot_sqrt_sum(x.d)]

    def plan(self, c: list[float], member: Any, x: SelectQuantities) -> SelectPlan:
        ns, tau_s = member.scattered_sizes(x.d)
        a = c[0] + c[1] * lg(x.s) + c[2] * lg(ns) + c[5] * member.hot_sqrt_sum(x.d)
        if not (ns and (c[3] or c[4])):
            return 2, a, 0.0, None
        f = member.sf_cost * ns / x.q if x.q else 0.0
        return 3, a, 1.0, (tau_s, f, c[3], c[4])


class WJJoinFirst(CostModel):
    """Theorem 4: the m_b partners within w_max each stab 𝒟 (g₃(n))."""

    name, terms = "WJ-JoinFirst", ("1", "lg m", "m_b·g3(n)")

    def features(self, member: Any, x: WindowQuantities) -> list[float]:
        return [1.0, lg(x.m), x.mb * g3(x.n)]

    def plan(self, c: list[float], member: Any, x: WindowQuantities) -> WindowPlan:
        return 0, c[0] + c[1] * lg(x.m), c[2] * g3(x.n), 0.0, 0.0, 0.0


class WJSelectFirst(CostModel):
    """Theorem 4: a stab of the interval tree, then n′ two-level lookups (g₂(m′))."""

    name, terms = "WJ-SelectFirst", ("1", "lg n", "lg m", "n'·g2(m')")

    def features(self, member: Any, x: WindowQuantities) -> list[float]:
        return [1.0, lg(x.n), lg(x.m), x.n1 * g2(x.mp)]

    def plan(self, c: list[float], member: Any, x: WindowQuantities) -> WindowPlan:
        return 1, c[0] + c[1] * lg(x.n) + c[2] * lg(x.m), c[3], 0.0, 0.0, 0.0


class WJSSI(CostModel):
    """§4.2: the skyline points m̄_b (or a pass over the m′_b partners) each stab 𝒟."""

    name, terms = "WJ-SSI", ("1", "lg m", "m'_b", "m̄_b·g3(n)")

    def features(self, member: Any, x: WindowQuantities) -> list[float]:
        mbar, mpb = skyline_sizes(fresh_skyline(member.skies[x.d], x.b), x.mb, x.mp,
                                  float(member.tau(x.d)))
        return [1.0, lg(x.m), mpb, mbar * g3(x.n)]

    def plan(self, c: list[float], member: Any, x: WindowQuantities) -> WindowPlan:
        return 2, c[0] + c[1] * lg(x.m), c[2], c[3] * g3(x.n), 0.0, float(member.tau(x.d))


class WJHotspot(CostModel):
    """§4.2: WJ-SSI on the hot subscriptions, WJ-SelectFirst on the n″ ≈ n′ · n_s / n
    scattered ones."""

    name, terms = "WJ-Hotspot", ("1", "lg m", "m'_b", "m̄_b·g3(n_H)", "n''·g2(m')")

    def features(self, member: Any, x: WindowQuantities) -> list[float]:
        ns = float(member.n_scattered(x.d))
        mbar, mpb = skyline_sizes(fresh_skyline(member.skies[x.d], x.b), x.mb, x.mp,
                                  float(member.tau(x.d)))
        scat = (x.n1 * ns / x.n if x.n else 0.0) * g2(x.mp)
        return [1.0, lg(x.m), mpb, mbar * g3(x.n - ns), scat]

    def plan(self, c: list[float], member: Any, x: WindowQuantities) -> WindowPlan:
        ns = float(member.n_scattered(x.d))
        return (3, c[0] + c[1] * lg(x.m), c[2], c[3] * g3(x.n - ns),
                c[4] * ns / x.n if x.n else 0.0, float(member.tau(x.d)))


class IJNestedLoop(CostModel):
    """IJ-NestedLoop: n searches of the key order (one per subscription), O(n log m)."""

    name, terms = "IJ-NestedLoop", ("1", "n·lg m")

    def features(self, member: Any, x: IntervalQuantities) -> list[float]:
        return [1.0, x.n * lg(x.m)]


class IJSSI(CostModel):
    """IJ-SSI: τ searches of the key order, O(τ log m) (as BJ-SSI, Theorem 2); its pending
    subscriptions cost a nested loop each."""

    name, terms = "IJ-SSI", ("1", "τ·lg m", "pending·lg m")

    def features(self, member: Any, x: IntervalQuantities) -> list[float]:
        lgm = lg(x.m)
        return [1.0, member.tau() * lgm, member.pending().shape[0] * lgm]


MODELS: dict[str, CostModel] = {m.name: m for m in (
    SJJoinFirst(), SJSelectFirst(), SJVanilla(), SJHotspot(), SJSSI(),
    BJQOuter(), BJDOuter(), BJMJ(), BJSSI(), BJHotspot(),
    WJJoinFirst(), WJSelectFirst(), WJSSI(), WJHotspot(), IJNestedLoop(), IJSSI())}
"""Every strategy's cost model, by paper name: the router, ``hotjoin calibrate`` and the tests
use these objects and nothing else."""
FEATURES: dict[str, tuple[str, ...]] = {name: m.terms for name, m in MODELS.items()}
"""Each strategy's feature names, the order of its fitted constants (Table II)."""
KIND_OF = {name: {"SJ": "select", "BJ": "band", "WJ": "window", "IJ": "interval"}[name[:2]]
           for name in FEATURES}


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
        # a strategy whose model changed since the fit (an upgrade) keeps the shipped or
        # built-in constants until `hotjoin calibrate` runs again; the rest of the file holds
        stale = sorted(k for k in doc.get("coef", {})
                       if k in feats and tuple(feats[k]) != FEATURES.get(k))
        ci = {k: [tuple(x) for x in v] for k, v in doc.get("ci95", {}).items() if k not in stale}
        meta = {**doc.get("meta", {}), **({"stale": stale} if stale else {})}
        return cls({k: [float(x) for x in v] for k, v in doc["coef"].items() if k not in stale},
                   ci, meta, str(p))


# Fallback constants (ns) used when neither the shipped nor a user profile has a strategy. They
# are rough per-operation costs of the numba kernels on one core of the development machine.
BUILTIN_COEF: dict[str, tuple[float, ...]] = {
    "SJ-JoinFirst": (3000.0, 30.0, 8.0),
    "SJ-SelectFirst": (3000.0, 30.0, 20.0, 8.0, 4.0),
    "SJ-Vanilla": (3000.0, 30.0, 4.0),
    "SJ-Hotspot": (4000.0, 30.0, 40.0, 10.0, 4.0, 3.0),
    "SJ-SSI": (3500.0, 30.0, 4.0, 1.0),
    "BJ-QOuter": (3000.0, 2.0),
    "BJ-DOuter": (3000.0, 10.0),
    "BJ-MJ": (3000.0, 1.5),
    "BJ-SSI": (3000.0, 6.0),
    "BJ-Hotspot": (3500.0, 6.0, 2.0),
    "IJ-NestedLoop": (3000.0, 3.0),
    "IJ-SSI": (3000.0, 8.0, 3.0),
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
