"""``perfci compile``: cross-compile each suite case for an architecture and report its resources.

Layers, each importable alone:

- :mod:`perfci.compile.arches`: the target table (CU/SM counts, register and
  LDS/shared budgets) and the occupancy arithmetic. Pure.
- :mod:`perfci.compile.plan`: a suite case -> the exact kernel launches
  ``perfci run`` makes on that arch (config, signature, specialization). Pure.
- :mod:`perfci.compile.resources`: parsers of compiled artifacts (amdgcn
  metadata, ptxas ``-v`` logs) into frozen dataclasses. Pure.
- :mod:`perfci.compile.build`: the IO edge that calls ``triton.compile``.
- :mod:`perfci.compile.render`: table and json.
- :mod:`perfci.compile.cli`: the thin command.
"""
