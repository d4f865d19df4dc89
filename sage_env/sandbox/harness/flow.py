"""The judge's count of what a test must reach: each site as often as its reported flow does.

A harness module (runs inside the sandbox): standard library only.

:func:`unreached` reads the ``flow`` that the rewriter records with a test's sites
(:class:`~sage_env.sandbox.harness.rewrite.Sites`) together with what the test's process
reported (how often each site was reached, each branch judged, each arm entered), and names
the first site that the flow the values decide reaches more often than it was reported.
"""

from __future__ import annotations

_INF = float("inf")


def unreached(sites: list, count: dict, truths: dict, arms: dict) -> str | None:
    """What the test's process should have reached and did not (``None``: nothing).

    ``count[k]``: how often site ``k`` was reported; ``truths[k]``: ``[true, false]``, how
    often branch site ``k`` was judged each way; ``arms[a]``: how often the process says arm
    ``a`` (a ``for`` iteration, a handler, a ``match`` case) was entered. Each site must be
    reached as often as the flow the reported values decide reaches it: once per entry of its
    arm, less one per ``break``/``continue`` before it in that arm and per exception caught by
    a ``try`` around it (a handler entered), a ``while`` condition once more per iteration;
    each ``if``/``while``/``match`` must be decided as often as it is reached; and a site that
    is not under ``if``/``try``/``while``/``match`` at least once (the rule before flow).
    """
    flow = getattr(sites, "flow", None)
    if flow is None:
        for k, site in enumerate(sites):
            if site[2] and not count.get(k):
                return f"{_label(sites, k)} was never checked"
        return None
    descs, tries, loops = flow["arms"], flow["tries"], flow["loops"]
    memo: dict = {}

    def caught(t):
        return sum(entered(h) for h in tries[t]["handlers"])

    total_caught = None

    def need(pos, clamp=True):
        nonlocal total_caught
        arm, jumps, around, in_def = pos
        if arm in jumps:
            return 0
        e = entered(arm) - sum(entered(j) for j in jumps)
        for t in around:
            e -= _INF if t == "with" else caught(t)
        if in_def:
            if total_caught is None:
                total_caught = sum(caught(t) for t in range(len(tries)))
            e -= total_caught + (_INF if flow["any_with"] else 0)
        return max(e, 0) if clamp else e

    def entered(a):
        if a in memo:
            return memo[a]
        memo[a] = 0  # no cycle is possible (an arm's count depends on outer arms only)
        d = descs[a]
        kind = d[0]
        if kind == "top":
            n = 1
        elif kind in ("T", "F"):
            n = truths.get(d[1], (0, 0))[kind == "F"]
        elif kind == "ev":
            n = arms.get(a, 0)
        elif kind == "reach":
            n = need(tries[d[1]]["pos"])
        elif kind == "telse":
            t = tries[d[1]]
            n = 0 if t["jumpy"] else max(need(t["pos"]) - caught(d[1]), 0)
        elif kind == "exit":
            loop = loops[d[1]]
            n = max(need(loop["pos"]) - sum(entered(b) for b in loop["breaks"]), 0)
        else:
            n = 0
        memo[a] = n
        return n

    extra = {}
    for loop in loops:  # a while condition is decided again after each iteration
        if loop["branch"] is not None:
            extra[loop["branch"]] = loop

    for k, site in enumerate(sites):
        pos = flow["pos"][k]
        if k in extra:
            loop = extra[k]
            want = need(pos, clamp=False) + truths.get(k, (0, 0))[0]
            want -= sum(entered(b) for b in loop["breaks"])
        else:
            want = need(pos)
        want = max(want, 1 if site[2] else 0)
        got = count.get(k, 0)
        if got < want:
            if not got:
                return f"{_label(sites, k)} was never checked"
            return f"{_label(sites, k)} was checked {got} times, its flow reaches it {int(want)}"
    for n, group in enumerate(flow["groups"]):
        want = need(group["pos"])
        if sum(entered(a) for a in group["arms"]) < want:
            return f"match statement {n} was never decided"
    return None


def _label(sites, k):
    kind = sites[k][0]
    return {"branch": "condition", "call": "statement"}.get(kind, "assertion") + f" {k}"
