"""What a night knows: its configuration, and the state its stages fill in.

:class:`Night` is mutable while the stages run (:mod:`perfci.nightly.tonight`,
:mod:`perfci.nightly.stages`) and is frozen into a :class:`perfci.nightly.core.Outcome`
at the end.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from perfci.benchcmd import DEFAULT_TIMEOUT_S
from perfci.nightly import core


@dataclass(frozen=True)
class NightConfig:
    suite: str
    out: Path
    shards: str | None = None
    run: str | None = None
    history: str | None = None
    baseline: str | None = None
    nights: int = 5
    jobs: int = 1
    repo: Path = Path(".")
    allow_missing: bool = False
    strict: bool = False
    bisect: bool = True
    device: str = "auto"
    noise_profile: str | None = None  # calibrate's JSON for this device; None: the arch's built-in
    confirm_args: tuple[str, ...] = ()
    bisect_args: tuple[str, ...] = ()
    bench_args: tuple[str, ...] = ()
    bench: str | None = None  # --bench CMD: the night's source (perfci.nightly.bench) instead of perfci run
    build: str | None = None  # --build CMD; None: [tool.perfci] build
    device_label: str | None = None  # this device's folder under [tool.perfci] baselines / history; None: the arch
    canary: float | None = None  # --canary PCT; None: 3 on a GPU night, none on a CPU night (perfci.nightly.canary)
    canary_off: bool = False  # --no-canary
    canary_budget_s: float = 60.0  # --canary-budget: the canary's rounds stop after this many seconds
    budget_s: float = core.NIGHT_BUDGET_S  # --budget: the whole night; confirm and bisect share what is left
    bench_timeout_s: float = DEFAULT_TIMEOUT_S  # --bench-timeout: a bench run past it is stopped, a failed run


@dataclass
class Night:
    """What the stages found so far (mutable; frozen into a core.Outcome at the end)."""

    cfg: NightConfig
    started: float = field(default_factory=time.monotonic)  # the night's budget counts from here
    repo_root: Path | None = None  # the git checkout confirm and bisect work in (None: not a repository)
    where: Path | None = None  # the project root: its [tool.perfci], suites and kernels; perfci runs here
    subdir: str = ""  # the project root relative to the repository's top ("" when they are one)
    build: str | None = None  # the build command in force (--build, else [tool.perfci] build)
    store: str | None = None  # the history store in force (--history, else [tool.perfci] history / device)
    baseline_path: str | None = None  # the baseline CSV in force (--baseline, else [tool.perfci] baselines)
    profile: str | None = None  # the noise profile in force (--noise-profile, else [tool.perfci] noise_profiles)
    head: str = ""
    suite_word: str = ""  # SUITE as the children get it (a .toml as an absolute path)
    suite: str = ""
    run_path: Path | None = None
    table: object = None  # tonight's ResultTable
    device: str = ""
    device_name: str = ""
    arch: str = ""
    sha: str = ""
    tonight: tuple = ()
    incomplete: str = ""
    first_night: bool = False
    baseline: str = ""
    good_sha: str = ""
    comparison: object = None  # compare's Comparison
    cases: tuple | None = None
    flagged: tuple = ()
    confirmed: tuple | None = None
    confirm_suite: str = "n/a"
    culprit: core.Culprit | None = None
    history_appended: bool = False
    canary: object = None  # tonight's perfci.history.canary.CanaryNight
    canary_rates: object = None  # perfci.history.canary.Rates over the store's canary nights and tonight's
    canary_csv: Path | None = None
    triage: tuple = ()  # perfci.nightly.triaged.CaseTriage of tonight's cases a triage record names
    toolchain: tuple = ()  # (what, baseline's, tonight's) of each toolchain part that moved (perfci.nightly.toolchain)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # what the canary and the report met: never the verdict
    files: list[str] = field(default_factory=list)

    def outcome(self, stages) -> core.Outcome:
        cmp = self.comparison
        return core.Outcome(
            suite=self.suite, device=self.device, arch=self.arch, sha=self.sha, good_sha=self.good_sha,
            stages=tuple(stages), tonight=tuple(self.tonight), incomplete=self.incomplete,
            first_night=self.first_night,
            baseline=self.baseline, cases=self.cases,
            compare_suite=cmp.suite.verdict if cmp is not None else "n/a",
            compare_notes=tuple(cmp.notes) if cmp is not None else (), flagged=tuple(self.flagged),
            confirmed=self.confirmed, confirm_suite=self.confirm_suite, culprit=self.culprit,
            history_appended=self.history_appended, allow_missing=self.cfg.allow_missing,
            strict=self.cfg.strict, notes=tuple(self.notes), files=tuple(self.files), canary=self.canary,
            canary_rates=self.canary_rates, warnings=tuple(self.warnings), triage=tuple(self.triage),
            toolchain=tuple(self.toolchain))
