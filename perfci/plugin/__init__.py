"""perfci as a pytest plugin: kernel benchmarks written as tests, measured like ``perfci run``.

:mod:`perfci.plugin.pytest_plugin` is the ``pytest11`` entry point (options, the
``perfci_benchmark`` fixture, the session's CSV and verdict). The other modules
are the parts it uses: :mod:`perfci.plugin.cases` (the fixture's arguments,
checked; pure), :mod:`perfci.plugin.measuring` (the measurement, with torch),
:mod:`perfci.plugin.session` (rows in, results CSV and compare out) and
:mod:`perfci.plugin.isolate` (one benchmark in a process of its own).
Loading the entry point imports pytest and perfci's light modules only (no
torch, no numpy), so the plugin costs next to nothing in a test run that does
not use it: measuring and session are imported where they are first needed.
"""
