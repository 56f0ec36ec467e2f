"""A project's own perfci settings: ``perfci config`` shows what is in force.

* :mod:`perfci.config` (shared layer) -- finds and reads ``[tool.perfci]``.
* :mod:`perfci.project.cli` -- the command.
"""
