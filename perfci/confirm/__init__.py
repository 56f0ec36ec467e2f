"""Confirming a change by interleaved runs of both revisions: `perfci confirm`."""
