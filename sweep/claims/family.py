"""The report's family of checks, and Holm's correction across it.

The family is every deciding check of every claim the report tests (the rows of
``tables/claims.csv`` with a p-value; "more evidence" rows, the attribution, tuning
and noise-scale numbers decide nothing and are not in it). A check without a p-value
(fewer than 2 seeds or pairs) is undecided and not counted. Holm keeps the chance that
any check in the family is decided wrongly below 5%, whatever their dependence.
"""

from __future__ import annotations

import dataclasses
import math

from sweep.analysis.estimates import ALPHA, holm
from sweep.claims.findings import Claim, Finding


def corrected(findings: list[tuple[Claim, Finding | None]]) -> list[tuple[Claim, Finding | None]]:
    """The findings with every check's Holm-adjusted p-value and the family's size set."""
    checks = [c for _, f in findings if f is not None for c in f.checks]
    adjusted = iter(holm([c.p_value()[0] for c in checks]))
    size = family_size(findings)
    out: list[tuple[Claim, Finding | None]] = []
    for claim, finding in findings:
        if finding is None:
            out.append((claim, None))
            continue
        fixed = tuple(dataclasses.replace(c, p_holm=next(adjusted), family=size) for c in finding.checks)
        out.append((claim, dataclasses.replace(finding, checks=fixed)))
    return out


def family_size(findings: list[tuple[Claim, Finding | None]]) -> int:
    return sum(math.isfinite(c.p_value()[0]) for _, f in findings if f is not None for c in f.checks)


def describe(findings: list[tuple[Claim, Finding | None]]) -> str:
    """The family in words, for the report."""
    per_claim = [
        f"{claim.id} {n}"
        for claim, f in findings
        if f is not None and (n := sum(math.isfinite(c.p_value()[0]) for c in f.checks))
    ]
    if not per_claim:
        return (
            "No check has a p-value (a check needs at least 2 seeds, or pairs, with numbers): nothing is decided "
            "here, so there is no family for Holm's correction. Evidence rows, the comparable readings, the "
            "condition maps, the attribution, the tuning and the noise scale are estimates and decide nothing."
        )
    return (
        f"Holm's correction runs over a family of {family_size(findings)} checks, every deciding check of every "
        f"claim tested here that has a p-value ({', '.join(per_claim)}), with the sequential p-value "
        "where a claim was continued with `run --until-decided`: one error budget for the whole report. Evidence "
        "rows, the comparable readings, the condition maps, the attribution, the tuning and the noise scale are "
        f"estimates and decide nothing. A check is decided when its Holm-adjusted p-value is below {ALPHA:.2f}: "
        f"the chance of any wrong decision in the report stays below {ALPHA:.0%}."
    )
