"""``perfci merge``: the results CSVs of ``perfci run --shard I/N`` joined into one run.

* :mod:`perfci.merge.core` -- pure: shard files in, a merged table (or one
  :class:`perfci.errors.PerfciError` saying why not) out, and its CSV text.
* :mod:`perfci.merge.cli` -- the command: reads the files, writes the result atomically.
"""
