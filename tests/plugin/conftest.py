# pytester runs sessions in this process and drops the modules they imported afterwards;
# numpy (and torch) cannot be imported twice in one process, so they are imported here first.
import numpy  # noqa: F401
import torch  # noqa: F401

import perfci.compare.cli  # noqa: F401
import perfci.compare.identity  # noqa: F401
import perfci.compare.inputs  # noqa: F401
import perfci.compare.render  # noqa: F401
import perfci.compare.verdicts  # noqa: F401
import perfci.measure.envinfo  # noqa: F401
import perfci.measure.telemetry  # noqa: F401
import perfci.measure.worker  # noqa: F401
import perfci.plugin.measuring  # noqa: F401
import perfci.plugin.session  # noqa: F401

# pytester itself is loaded for the whole run by pyproject.toml (addopts -p pytester).
