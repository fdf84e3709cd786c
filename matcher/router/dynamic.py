"""The per-tuple cost-based routers of paper 004 §4: ``SJ-Dynamic``, ``BJ-Dynamic``, ``WJ-Dynamic``.

Each Dynamic strategy keeps every member strategy's index up to date (the paper's
"pre-compiled alternatives") and, per incoming tuple, evaluates each member's cost model
(``router/cost_model.py``) from exact quantities (|S|, |Q|, τ, hotspot sizes, the key's partner
count m′, a window key's m_b) and estimated ones (n′ from an interval histogram of the
subscriptions' own ranges, ``router/estimators.py``; n″ and m̄_b as §4.1/§4.2 describe), then
runs only the cheapest member. Every member yields the same deliveries, so routing never
changes results — only speed. The routers are kinds' indexes like their members (the kind
interface, ``joins/interface.py``) and reach the members only through it. One module does one
thing:

==========================  =========================================================
module                      what
==========================  =========================================================
``router/learning.py``      members, decisions, forcing, the online calibration
``router/estimators.py``    n′(v) from interval histograms of the own ranges
``router/select.py``        SJ-Dynamic (§4.1): a plan, settled choices, batch stretches
``router/band.py``          BJ-Dynamic (§4.2): one choice per ``BAND_REFRESH`` tuples
``router/window.py``        WJ-Dynamic (§4.2): m_b, skyline sizes, runs of clear choices
``router/choice_kernels.py``  the compiled per-tuple and per-stretch decisions
==========================  =========================================================

This module names them for the engine's registry (``matcher/kinds.py``) and the tools
(``hotjoin calibrate``, ``hotjoin bench router``).
"""

from __future__ import annotations

from hotjoin.matcher.router.band import BandDynamic
from hotjoin.matcher.router.select import SelectDynamic
from hotjoin.matcher.router.window import WindowDynamic

ROUTERS = {"select": SelectDynamic, "band": BandDynamic, "window": WindowDynamic}
"""Each kind's router class."""
DEFAULT_MEMBERS = {kind: r.default_members for kind, r in ROUTERS.items()}
"""The alternatives each Dynamic strategy routes between (option ``router_members`` overrides).
SJ-Dynamic uses the paper's four (§5.4); SJ-SSI is left out as SJ-Hotspot contains it."""
DYNAMIC_NAMES = {kind: r.name for kind, r in ROUTERS.items()}
"""Each kind's router by paper name (``strategy="auto"``)."""

__all__ = ["DEFAULT_MEMBERS", "DYNAMIC_NAMES", "ROUTERS", "BandDynamic", "SelectDynamic",
           "WindowDynamic"]
