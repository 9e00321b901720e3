"""Error control per claim, and the false-discovery view across claims beside the verdicts.

A claim's verdict rests on its own deciding checks (`Finding.checks`) alone, so it never depends on
which other claims or folders a report read:

- every check must hold (`Rule.ALL`): an intersection-union test. The claim is supported when each check
  holds at ALPHA (no correction: the claim is wrong only if some check is, and that check's own test keeps
  that chance below ALPHA); it is contradicted when one of its k checks fails at ALPHA / k (Bonferroni over
  the claim's checks: any of the k may be the one that fails);
- one check is enough (`Rule.ANY`, C4's kinds of mismatch): the mirror image. Supported when one of its
  k checks holds at ALPHA / k, contradicted when every check fails at ALPHA.

The size statements and mechanisms (`Finding.size`, `Finding.mechanism`) are statements of their own,
each at ALPHA. Across the report, Benjamini-Hochberg q-values over every deciding check (tables/claims.csv's
q_bh, `sweep.analysis.estimates.q_values`) say how many of the decided checks could be false discoveries;
the verdicts do not use them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from sweep.analysis.estimates import ALPHA, Check
from sweep.claims.findings import Claim, Finding, Rule


def controlled(finding: Finding) -> Finding:
    """The finding with each deciding check's levels set by its claim's rule over its own checks."""
    holds, fails = levels([c for c in finding.checks if math.isfinite(c.p_value()[0])], finding.rule)
    checks = tuple(dataclasses.replace(c, level_holds=holds, level_fails=fails) for c in finding.checks)
    return dataclasses.replace(finding, checks=checks)


def each_controlled(findings: list[tuple[Claim, Finding | None]]) -> list[tuple[Claim, Finding | None]]:
    return [(claim, None if f is None else controlled(f)) for claim, f in findings]


def levels(checks: Sequence[Check], rule: Rule) -> tuple[float, float]:
    """(holds, fails): the levels of a claim's k checks with a p-value under its rule (a check without one decides
    nothing and is not counted), for `controlled` and the sequential looks.
    """
    k = max(1, len(checks))
    return (ALPHA, ALPHA / k) if rule is Rule.ALL else (ALPHA / k, ALPHA)


def describe(findings: list[tuple[Claim, Finding | None]]) -> str:
    """The error control in words, for the report."""
    per_claim = [
        f"{claim.id} {n}"
        for claim, f in findings
        if f is not None and (n := sum(math.isfinite(c.p_value()[0]) for c in f.checks))
    ]
    if not per_claim:
        return (
            "No check has a p-value (a check needs at least 2 seeds, or pairs, with numbers): nothing is decided "
            "here. Evidence rows, the comparable readings, the condition maps, the attribution, the tuning and the "
            "noise scale are estimates and decide nothing."
        )
    return (
        f"Error control is per claim, over its own deciding checks ({', '.join(per_claim)}), so a verdict never "
        f"depends on which other claims or folders this report read. A claim whose checks must all hold is "
        f"supported when each holds at {ALPHA:g} (an intersection-union test needs no correction) and "
        f"contradicted when one of its k checks fails at {ALPHA:g} / k (Bonferroni); a claim where one check is "
        f"enough (C4) the other way round. Size statements and mechanisms are statements of their own, each at "
        f"{ALPHA:g}. Across claims, tables/claims.csv's q_bh column holds Benjamini-Hochberg q-values over every "
        "deciding check (the false-discovery view); the verdicts do not use them. Evidence rows, the comparable "
        "readings, the condition maps, the attribution, the tuning and the noise scale are estimates and decide "
        "nothing."
    )
