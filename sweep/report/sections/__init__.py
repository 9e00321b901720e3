"""The report's sections, written as blocks of a `sweep.report.document.Doc`.

- `assemble`: the whole report in reading order: the opening, the verdicts in full, the header, each claim;
- `answer`, `first_screen`: the answer in full sentences and in short (`sweep.report.summary`), the verdict table
  and what `run` and `report` print at their end;
- `headline`: C1's headline over its condition map, in words;
- `maps`: "Where each claim holds" (condition maps) and "Reproducing the post's numbers";
- `readings`: the batch-size claims re-read at comparable points, the attribution of C1's gap, the tuning;
- `steps`: "Steps to target" and "Gradient noise scale", and their CSV tables;
- `until`: "Seeds until decided", from the decisions.csv of `run --until-decided`.
"""
