"""Confirming a change by interleaved runs of both revisions: `perfci confirm`."""

# Ten minutes: a nightly's confirm of its flagged cases fits (on an H200 a round of eight cases
# costs ~15 s, so ~40 rounds), and a cheap bench gets hundreds of rounds where it needs them.
DEFAULT_BUDGET_S = 600.0
