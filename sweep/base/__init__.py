"""The bottom layer, shared by every package above it (tests/layers.py shows the layers).

- `atomic`: files written whole or not at all, never through a link at their destination;
- `seeds`: named sub-seeds, one per random stream of a run.
"""
