"""``perfci compile``: cross-compile each suite case for an architecture and report its resources.

Layers, each importable alone:

- :mod:`perfci.compile.arches`: the target table (CU/SM counts, register and
  LDS/shared budgets) and the occupancy arithmetic. Pure.
- :mod:`perfci.compile.plan`: a suite case -> the exact kernel launches
  ``perfci run`` makes on that arch (config, signature, specialization). Pure.
- :mod:`perfci.compile.resources`: parsers of compiled artifacts (amdgcn
  metadata, ptxas ``-v`` logs) into frozen dataclasses. Pure.
- :mod:`perfci.compile.build`: the IO edge that calls ``triton.compile``.
- :mod:`perfci.compile.cache`: the disk cache of compiled resources.
- :mod:`perfci.compile.render`: table and json.
- :mod:`perfci.compile.baseline`: resources files (the baselines), to and from JSON.
- :mod:`perfci.compile.diff`: two resources files -> per case what rose or fell, and a verdict. Pure.
- :mod:`perfci.compile.accept`: the changes accepted, each with its bound and reason. Pure data.
- :mod:`perfci.compile.render_diff`: the diff as table, markdown and json.
- :mod:`perfci.compile.toolchain`: ``--against-triton``: the same commit under another Triton.
- :mod:`perfci.compile.ratchet`: the diff for the nightly's reports and compare --explain.
- :mod:`perfci.compile.cli`: the thin command.
"""
