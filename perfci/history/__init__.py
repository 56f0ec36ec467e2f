"""``perfci history``: a store of nightly runs, their trends and change points.

Layout (pure core, IO at the edge, as in :mod:`perfci.compare`):

* :mod:`perfci.history.model` -- frozen dataclasses (a run, the store's manifest,
  a case's series) and the pure functions that build series from runs.
* :mod:`perfci.history.store` -- the store on disk: a directory with a versioned
  manifest and one results CSV per run; ``add`` and ``load``.
* :mod:`perfci.history.nights` -- what one night of one case is worth: its level, in time
  or in cycles, and that level's variance (pure).
* :mod:`perfci.history.clockspace` -- which space each case is judged in: cycles where
  its clock explains its nightly spread, time otherwise (pure).
* :mod:`perfci.history.changepoints` -- change points in one case's series (pure).
* :mod:`perfci.history.check` -- ``history check``: every case's change points,
  and their text and JSON renderings (pure).
* :mod:`perfci.history.canary` -- the nightly canary's records and the
  detector's rates (pure).
* :mod:`perfci.compare.pooled` -- ``perfci compare STORE CUR``: tonight against
  the last K nights, with each case's between-night spread (pure).
* :mod:`perfci.history.otava` -- Apache Otava's CSV and config (pure text).
* :mod:`perfci.history.plot`, :mod:`perfci.history.report` -- PNG and a static
  HTML site; :mod:`perfci.history.trends` writes the trend PNGs into a folder.
* :mod:`perfci.history.cli` -- the ``perfci history`` command.

Nothing is imported here, so ``perfci --help`` does not pay for numpy.
"""
