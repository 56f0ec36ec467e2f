"""Judging two runs: `perfci compare` and `perfci calibrate`."""
