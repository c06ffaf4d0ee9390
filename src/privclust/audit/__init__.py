"""Statistical privacy audits: high-confidence lower bounds on the privacy loss, and controls that must fail.

For a mechanism M and neighbouring data sets D, D' (D' = D plus one row,
chosen where M is most sensitive to it), an audit draws M's output many times
on each side, learns a test between them on half the draws and measures it on
the other half.  The measured error rates bound the privacy loss from below
with the stated confidence (Clopper-Pearson; see :mod:`.bounds`).  A bound above
the claim refutes the claim.  A bound below it means only that this test, at
this number of draws, found no violation: an audit can refute, never prove.

Every run also audits *controls*: the same mechanisms with the library broken
on purpose (:mod:`.broken`: noise halved, clipping dropped).  They must be
caught, or the audit has no power and a pass means nothing.

>>> from privclust.audit import audit_all, passed
>>> results = audit_all(scale=0.2)        # doctest: +SKIP
>>> passed(results)                        # doctest: +SKIP
"""

from __future__ import annotations

from contextlib import nullcontext

from .bounds import Claim, cp_lower, cp_upper
from .broken import scaled_noise, unclipped_domain
from .cases import CASES, CONTROLS, Case, Control
from .run import CHUNKS, CONFIDENCE, AuditResult, run_audit

__all__ = [
    "AuditResult",
    "CASES",
    "CONTROLS",
    "CONFIDENCE",
    "Case",
    "Claim",
    "Control",
    "audit",
    "audit_all",
    "cp_lower",
    "cp_upper",
    "default_draws",
    "passed",
    "plan",
    "run_audit",
    "scaled_noise",
    "ticks",
    "unclipped_domain",
]


def audit(item: Case | Control, draws: int | None = None, confidence: float = CONFIDENCE, tick=None) -> AuditResult:
    """Audit one case, or one control (with the library broken while it draws)."""
    control = item if isinstance(item, Control) else None
    case = control.case if control is not None else item
    n = draws or default_draws(item)
    with control.broken() if control is not None else nullcontext():
        sample, claim = case.build()
        result = run_audit(
            item.name,
            sample,
            claim,
            n,
            confidence=confidence,
            discrete=case.discrete,
            family=case.family,
            broken_on_purpose=control is not None,
            noise=case.noise,
            pair=case.pair,
            tick=tick,
        )
    report = getattr(sample, "report", None)
    if report is not None:  # checks of its own (the federated view's uniformity test)
        extra, failed = report(confidence)
        result.extra.update(extra)
        result.violated = result.violated or failed
    return result


def plan(names=None, controls: bool = True) -> list[Case | Control]:
    """The audits to run: every case, then every control (or those named)."""
    items: list[Case | Control] = [*CASES.values(), *(CONTROLS.values() if controls else ())]
    if names:
        unknown = sorted(set(names) - {i.name for i in items})
        if unknown:
            raise ValueError(f"unknown audits {unknown}; available: {', '.join(i.name for i in items)}")
        items = [i for i in items if i.name in names]
    return items


def ticks(items) -> int:
    """How many times :func:`audit_all` calls ``tick`` for these audits (for a progress bar)."""
    return len(items) * 2 * CHUNKS


def default_draws(item: Case | Control) -> int:
    """Draws per side at the default strength: the control's own, else its case's."""
    if isinstance(item, Control) and item.draws:
        return item.draws
    return item.case.draws if isinstance(item, Control) else item.draws


def audit_all(
    scale: float = 1.0,
    names=None,
    controls: bool = True,
    confidence: float = CONFIDENCE,
    draws: int | None = None,
    tick=None,
    on_done=None,
) -> list[AuditResult]:
    """Run :func:`plan`'s audits, each at ``draws`` per side or ``scale`` times its default."""
    results = []
    for item in plan(names, controls):
        n = draws or max(40, int(round(default_draws(item) * scale)))
        results.append(audit(item, n, confidence, tick))
        if on_done is not None:
            on_done(results[-1])
    return results


def passed(results) -> bool:
    """No real mechanism above its claim, and every control caught."""
    return all(r.ok for r in results)
