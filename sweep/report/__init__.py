"""The claims report: report.md / report.html, rendered from what `sweep.claims` found.

`build(folders, out)` reads results folders (runs.csv, epochs.csv only), writes
tables (`sweep.analysis`), figures (`sweep.report.figures.curves`), ``tables/claims.csv``,
``report.md`` and a self-contained ``report.html``. No TensorFlow, and nothing
read from the repository: an installed package rebuilds a report from the CSVs alone.
What a claim is, how it is checked and decided lives in `sweep.claims`; this package only presents it.

One job per module, data flowing one way:

- `writer`: `build`, the report written from results folders;
- `summary`: what the answer says, read once from the findings and maps;
- `sections/`: the report's sections as blocks of a `Doc`; `figures/`: its figures;
- `document`: the blocks and their Markdown and HTML renderers;
- `background`: one function run in a forked child while the report goes on;
- `provenance`: git commit, package versions, machine (`stamp` reads it too);
- `stamp`: whether `sweep report` may keep the report it wrote last time;
- `study_report`, `study_words`: a batch-size study's report (study.md, study.html) and its recommendation in
  words (`sweep study`, `sweep advise`).
"""

from sweep.claims.findings import Claim, Finding, claims_table
from sweep.claims.registry import CLAIMS, evaluate
from sweep.claims.verdict import verdict_text
from sweep.report.writer import Written, build

__all__ = ["CLAIMS", "Claim", "Finding", "Written", "build", "claims_table", "evaluate", "verdict_text"]
