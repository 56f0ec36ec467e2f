"""A project's own perfci settings: ``perfci config`` shows what is in force, ``perfci init`` writes it.

* :mod:`perfci.config` (shared layer) -- finds and reads ``[tool.perfci]``.
* :mod:`perfci.project.init` -- the files ``perfci init`` writes (``templates/``: the workflows).
* :mod:`perfci.project.cli` -- the commands.
"""
