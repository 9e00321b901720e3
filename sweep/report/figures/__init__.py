"""The report's figures, PNG (and SVG on request) into <out>/figures/, each drawn only when what it shows changed.

- `files`: a figures folder's files and its index (`figures.json`): `FigureFile`, `cached_or_drawn`, `prune`;
- `layout`: titles, margins, legends, panels and line encodings shared by every figure;
- `curves`: each results folder's own figures (accuracy and gap curves, final val_acc and speed by batch size);
- `post`: the first screen's figure, the post's picture drawn from the runs its claim read;
- `maps`: a condition map, one panel per check and one row per setting;
- `seeds`: the seeds that would decide each undecided check at 80% power;
- `steps`: steps to target against batch size, with the perfect-scaling line.
"""
