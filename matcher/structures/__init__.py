"""Generic dynamic structures the strategies are built from (no paper concept of their own).

Sorted runs (:mod:`sorted_runs`), pools of sorted groups (:mod:`group_pool`, :mod:`gapped_pool`),
the interval tree and its compiled stabbing query (:mod:`interval_tree`), the rectangle index of
SJ-SSI's per-group probes (:mod:`rect_index`), the per-key index of a base table (:mod:`key_index`),
group member lists threaded through flat columns (:mod:`member_lists`) and the per-tuple partner
bucket table of SJ-SelectFirst (:mod:`partner_buckets`). The searches and sorted inserts they share
are ``matcher/core.py``'s.
"""
