"""Measuring a suite: `perfci run`."""
