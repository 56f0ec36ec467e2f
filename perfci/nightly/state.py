"""What a night knows: its configuration, and what its stages produced.

Each stage (:mod:`perfci.nightly.tonight`, :mod:`perfci.nightly.stages`,
:mod:`perfci.nightly.canary`) takes what the earlier ones produced as arguments
(:class:`TonightResult`, the loaded store, :class:`Judgement`, ...) and returns
its own typed result in a :class:`StageOutcome`; the runner
(:mod:`perfci.nightly.night`) keeps each on :class:`Night`, which is frozen into
a :class:`perfci.nightly.core.Outcome` at the end.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, Mapping, TypeVar

from perfci.benchcmd import DEFAULT_TIMEOUT_S
from perfci.compare.comparison import Comparison
from perfci.config import BUILD_TIMEOUT_S
from perfci.history.canary import CanaryNight, Rates
from perfci.history.model import RunInfo, run_info
from perfci.model import ResultTable, column_mode
from perfci.nightly import core
from perfci.nightly.loaded import Store
from perfci.nightly.triaged import CaseTriage

R = TypeVar("R")


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


@dataclass(frozen=True)
class Project:
    """Where the night runs, as stage tonight finds it first: the checkout, the project root, the build, the suite."""

    repo_root: Path | None = None  # the git checkout confirm and bisect work in (None: not a repository)
    where: Path | None = None  # the project root: its [tool.perfci], suites and kernels; perfci runs here
    subdir: str = ""  # the project root relative to the repository's top ("" when they are one)
    build: str | None = None  # the build command in force (--build, else [tool.perfci] build)
    build_timeout: float = BUILD_TIMEOUT_S  # [tool.perfci] build_timeout: each build's limit, in seconds
    head: str = ""  # --repo's HEAD
    suite: str = ""  # the suite's name: what tonight is recorded and judged under
    suite_word: str = ""  # SUITE as the children get it (a .toml as an absolute path)


@dataclass(frozen=True)
class Sources:
    """What tonight is judged by, as stage tonight settles it from tonight's device."""

    store: str | None = None  # the history store in force (--history, else [tool.perfci] history / device)
    baseline: str | None = None  # the baseline CSV in force (--baseline, else [tool.perfci] baselines)
    profile: str | None = None  # the noise profile in force (--noise-profile, else [tool.perfci] noise_profiles)


@dataclass(frozen=True)
class StageOutcome(Generic[R]):
    """What a stage returns: its status and detail (a line of the reports), and its typed result."""

    status: str
    detail: str
    result: R | None = None


class Unfinished(Exception):
    """A stage's failure (``cause``) after part of its result was known: the reports still say that part."""

    def __init__(self, cause: BaseException, result: object) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.result = result


@dataclass
class Log:
    """What every stage may add to the reports as it goes: notes, warnings (never the verdict), files."""

    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class TonightResult:
    """Tonight's results (DIR/run.csv), read once: the table every later stage judges, and its cells."""

    path: Path
    text: str  # as DIR/run.csv holds it: what stage history adds to the store
    table: ResultTable
    cells: tuple[Mapping[str, str], ...]
    sha: str  # tonight's commit (--repo's HEAD when the run names none)
    incomplete: str = ""  # why tonight's shards do not hold every case their run selected

    @property
    def device_name(self) -> str:
        return column_mode(self.cells, "device_name")

    @property
    def arch(self) -> str:
        return column_mode(self.cells, "arch")

    @property
    def device(self) -> str:
        name, arch = self.device_name, self.arch
        return f"{name} ({arch})" if name and arch else (name or arch or "?")

    @property
    def statuses(self) -> tuple[tuple[core.Key, str], ...]:
        return tuple((r.key, r.status) for r in self.table.rows)

    @property
    def info(self) -> RunInfo:
        """Tonight's identity in a history store (one line when its environment columns cannot make one)."""
        return run_info(str(self.path), self.table, self.cells)

    @property
    def run_id(self) -> str:
        return self.info.run_id


@dataclass(frozen=True)
class Judgement:
    """The baseline stage's result: what tonight was judged against, and compare's verdicts."""

    baseline: str  # in words
    first_night: bool = False
    good_sha: str = ""  # the baseline's commit: what confirm and bisect compare tonight with
    comparison: Comparison | None = None
    cases: tuple[core.Judged, ...] | None = None
    toolchain: tuple[tuple[str, str, str], ...] = ()  # (what, baseline's, tonight's) of each part that moved
    triage: tuple[CaseTriage, ...] = ()  # tonight's cases a triage record of the store names


@dataclass(frozen=True)
class Confirmation:
    """The confirm stage's result: the cases it was given, and its verdicts (None: it did not measure)."""

    flagged: tuple[core.Key, ...] = ()
    confirmed: tuple[core.Confirmed, ...] | None = None
    suite: str = "n/a"  # confirm's verdict on the shift the flagged cases share
    min_effect_pct: float | None = None  # the floor confirm judged with: bisect uses the same one


@dataclass(frozen=True)
class CanaryResult:
    """The canary stage's result: tonight's canary, the detectors' rates with it, and its run's CSV."""

    night: CanaryNight
    rates: Rates
    csv: Path


@dataclass
class Night:
    """What the stages produced so far, each result kept by the runner (:mod:`perfci.nightly.night`) and
    frozen into a core.Outcome at the end; and the history store, loaded once for every stage that reads it."""

    cfg: NightConfig
    started: float = field(default_factory=time.monotonic)  # the night's budget counts from here
    project: Project = Project()
    sources: Sources = Sources()
    tonight: TonightResult | None = None
    store: Store = field(default_factory=lambda: Store(None))  # the store in force as loaded (perfci.nightly.loaded), set with ``sources``
    judged: Judgement | None = None
    confirmation: Confirmation = Confirmation()
    culprit: core.Culprit | None = None
    bisect_denied: str = ""  # bisect's own GOOD -> BAD check found no step past the floor (its words)
    history_appended: bool = False
    canary: CanaryResult | None = None
    log: Log = field(default_factory=Log)

    def outcome(self, stages) -> core.Outcome:
        t, j, c, log = self.tonight, self.judged, self.confirmation, self.log
        cmp = j.comparison if j is not None else None
        return core.Outcome(
            suite=self.project.suite, device=t.device if t else "", arch=t.arch if t else "",
            sha=t.sha if t else "",
            good_sha=j.good_sha if j else "", stages=tuple(stages), tonight=t.statuses if t else (),
            incomplete=t.incomplete if t else "", first_night=j.first_night if j else False,
            baseline=j.baseline if j else "", cases=j.cases if j else None,
            compare_suite=cmp.suite.verdict if cmp is not None else "n/a",
            compare_notes=tuple(cmp.notes) if cmp is not None else (), flagged=c.flagged,
            confirmed=c.confirmed, confirm_suite=c.suite, culprit=self.culprit, bisect_denied=self.bisect_denied,
            history_appended=self.history_appended, allow_missing=self.cfg.allow_missing,
            strict=self.cfg.strict, notes=tuple(log.notes), files=tuple(log.files),
            canary=self.canary.night if self.canary else None,
            canary_rates=self.canary.rates if self.canary else None, warnings=tuple(log.warnings),
            triage=j.triage if j else (), toolchain=j.toolchain if j else ())
