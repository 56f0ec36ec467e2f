"""The GitHub Actions workflows: what they expand to, and the rules they keep.

The nightly's matrix is expanded here with GitHub's documented rules (the
cartesian product of the matrix's keys, minus `exclude`, then each `include`
entry added to every combination whose *original* values it does not
overwrite, or appended as a combination of its own when it fits none), and must
give every device x every shard on that device's runners. The old nightly,
kept under tests/data/workflows/, expanded to two H200 jobs: the same checks
must catch it. Then the hardening rules every workflow keeps (pinned actions,
no persisted credentials, least privilege, no `${{ }}` in scripts, no fork
reaching a self-hosted runner), and zizmor, offline, over the real files.
The A/A calibration workflow runs where the nightly's GPU 0 shard runs, and its
step scripts are run here, with a stand-in for `perfci run`.
"""
from __future__ import annotations

import copy
import itertools
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml", reason="pyyaml is in the test extra: pip install -e '.[test]'")

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
DATA = ROOT / "tests" / "data" / "workflows"
DOCS = ROOT / "docs" / "ci.md"

# The devices of the nightly and the runner label of each one's hosts.
DEVICES = {"gfx942": "mi300x", "gfx950": "mi355x", "h200": "h200"}

# Every write permission any workflow holds, and where: nothing else may write.
WRITES = {
    ("nightly-gpu.yml", "history", "contents"),
    ("nightly-gpu.yml", "issue", "issues"),
    ("perf-pr.yml", "request", "actions"),
    ("perf-pr.yml", "comment", "pull-requests"),
    ("perfci-triage.yml", "record", "contents"),
    ("perfci-triage.yml", "record", "issues"),
    ("perfci-stale.yml", "stale", "issues"),
}

# Events a pull request, or anyone without write access, can cause. A
# self-hosted job must never run on them.
FORK_REACHABLE = {"pull_request", "pull_request_target", "pull_request_review",
                  "pull_request_review_comment", "issue_comment", "issues", "workflow_run",
                  "discussion", "discussion_comment", "fork", "watch", "merge_group"}

# Pedantic zizmor findings kept on purpose, each explained in docs/ci.md.
PEDANTIC_KEPT: set[str] = set()

EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
GITHUB_HOSTED = re.compile(r"^(ubuntu|windows|macos)-[\w.-]+$")
SHA = re.compile(r"^[0-9a-f]{40}$")


# --------------------------------------------------------------------------- reading


def load(path: Path) -> dict:
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    # YAML 1.1 reads the key `on` as the boolean True.
    if True in doc:
        doc["on"] = doc.pop(True)
    return doc


def triggers(doc: dict) -> set[str]:
    on = doc.get("on")
    if isinstance(on, str):
        return {on}
    if isinstance(on, list):
        return set(on)
    return set(on or {})


def steps(job: dict) -> list[dict]:
    return job.get("steps") or []


def workflow_files() -> list[Path]:
    return sorted(WORKFLOWS.glob("*.yml")) + sorted(WORKFLOWS.glob("*.yaml"))


# --------------------------------------------------------------------------- the matrix


def _matches(combo: dict, entry: dict) -> bool:
    return all(k in combo and combo[k] == v for k, v in entry.items())


def expand_matrix(matrix: dict | None) -> list[dict]:
    """The job combinations of ``strategy.matrix``, by GitHub's documented rules.

    1. The cartesian product of every key but `include` and `exclude`.
    2. `exclude`: drop each combination that matches all of an entry's pairs.
    3. `include`, entry by entry: add the entry's pairs to every combination
       where none of them would overwrite an *original* value (values added by
       an earlier include may be overwritten); an entry that fits no original
       combination becomes a combination of its own (and later entries never
       extend it). With no keys but `include`, each entry is a combination.
    """
    if matrix is None:
        return [{}]
    if not isinstance(matrix, dict):
        raise ValueError(f"a matrix from an expression cannot be expanded statically: {matrix!r}")
    keys = [k for k in matrix if k not in ("include", "exclude")]
    combos = [dict(zip(keys, values)) for values in itertools.product(*(matrix[k] for k in keys))] if keys else []
    combos = [c for c in combos if not any(_matches(c, e) for e in matrix.get("exclude") or [])]
    originals = [dict(c) for c in combos]
    added = []
    for entry in matrix.get("include") or []:
        fits = False
        for combo, original in zip(combos, originals):
            if all(original[k] == v for k, v in entry.items() if k in original):
                combo.update(entry)
                fits = True
        if not fits:
            added.append(dict(entry))
    return combos + added


def resolve(value, matrix: dict):
    """``value`` with every ``${{ matrix.KEY }}`` replaced by the combination's value.

    A string that is one whole matrix expression takes the value itself (it may
    be a list); other expressions are left as they are.
    """
    if isinstance(value, list):
        return [resolve(v, matrix) for v in value]
    if isinstance(value, dict):
        return {k: resolve(v, matrix) for k, v in value.items()}
    if not isinstance(value, str):
        return value
    whole = re.fullmatch(r"\$\{\{\s*matrix\.([\w-]+)\s*\}\}", value.strip())
    if whole and whole.group(1) in matrix:
        return matrix[whole.group(1)]

    def one(m: re.Match) -> str:
        ref = re.fullmatch(r"matrix\.([\w-]+)", m.group(1))
        return str(matrix[ref.group(1)]) if ref and ref.group(1) in matrix else m.group(0)
    return EXPR.sub(one, value)


def job_instances(job: dict) -> list[tuple[dict, dict]]:
    """(combination, job with its matrix values substituted) for every job the matrix makes."""
    return [(combo, resolve(job, combo)) for combo in expand_matrix((job.get("strategy") or {}).get("matrix"))]


def labels(runs_on) -> list[str]:
    if isinstance(runs_on, dict):  # {group: ..., labels: ...}
        return ["group:" + str(runs_on.get("group"))] + [str(x) for x in runs_on.get("labels") or []]
    if isinstance(runs_on, list):
        return [str(x) for x in runs_on]
    return [str(runs_on)]


def self_hosted(runs_on) -> bool:
    """Anything but a GitHub-hosted image label counts as self-hosted (so an unresolved expression does)."""
    return not all(GITHUB_HOSTED.match(label) for label in labels(runs_on))


# --------------------------------------------------------------------------- the rules


def pin_problems(text: str, name: str) -> list[str]:
    """Every `uses:` pinned to a full commit SHA, with the version in a comment."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        m = re.match(r"^\s*(?:-\s*)?uses:\s*['\"]?([^\s'\"#]+)['\"]?\s*(#.*)?$", line)
        if not m:
            continue
        ref, comment = m.group(1), m.group(2) or ""
        if ref.startswith("./"):
            continue
        if ref.startswith("docker://"):
            if "@sha256:" not in ref:
                out.append(f"{name}:{n}: {ref} is not pinned by digest")
            continue
        action, _, version = ref.partition("@")
        if not SHA.match(version):
            out.append(f"{name}:{n}: {ref} is not pinned to a full commit SHA")
        elif not re.match(r"#\s*v?\d", comment):
            out.append(f"{name}:{n}: {action} pinned without its version in a comment")
    return out


def script_problems(doc: dict, name: str) -> list[str]:
    """No expression in a `run:` script: values go through `env:` (script injection)."""
    out = []
    for job_id, job in (doc.get("jobs") or {}).items():
        for i, step in enumerate(steps(job)):
            run = step.get("run")
            if isinstance(run, str) and "${{" in run:
                out.append(f"{name}: jobs.{job_id}.steps[{i}] has ${{{{ }}}} inside run: "
                           f"({', '.join(EXPR.findall(run))}); pass it through env:")
    return out


def checkout_problems(doc: dict, name: str) -> list[str]:
    out = []
    for job_id, job in (doc.get("jobs") or {}).items():
        for i, step in enumerate(steps(job)):
            if str(step.get("uses", "")).startswith("actions/checkout@"):
                value = (step.get("with") or {}).get("persist-credentials")
                if value is not False and str(value).lower() != "false":
                    out.append(f"{name}: jobs.{job_id}.steps[{i}] checkout without persist-credentials: false")
    return out


def permission_problems(doc: dict, name: str) -> list[str]:
    out = []
    if doc.get("permissions", None) != {}:
        out.append(f"{name}: top-level permissions is {doc.get('permissions', 'missing')!r}, not {{}}")
    for job_id, job in (doc.get("jobs") or {}).items():
        perms = job.get("permissions")
        if perms is None:
            out.append(f"{name}: jobs.{job_id} has no permissions: of its own")
        elif not isinstance(perms, dict):
            out.append(f"{name}: jobs.{job_id} permissions {perms!r} (write-all/read-all): name each scope")
    return out


def job_problems(doc: dict, name: str) -> list[str]:
    """Timeouts everywhere; concurrency on self-hosted jobs; no fork event reaching one."""
    out = []
    events = triggers(doc)
    for bad in sorted(events & {"pull_request_target", "workflow_run"}):
        out.append(f"{name}: triggered by {bad}, which runs with this repository's secrets and token on a PR's code")
    reachable = events & FORK_REACHABLE
    for job_id, job in (doc.get("jobs") or {}).items():
        if "timeout-minutes" not in job:
            out.append(f"{name}: jobs.{job_id} has no timeout-minutes")
        instances = job_instances(job) if job.get("runs-on") is not None else []
        if not any(self_hosted(j.get("runs-on")) for _, j in instances):
            continue
        conc = job.get("concurrency")
        if not isinstance(conc, dict) or conc.get("cancel-in-progress") is not False or "${{" not in str(conc.get("group", "")):
            out.append(f"{name}: self-hosted jobs.{job_id} needs concurrency keyed on its runner/GPU "
                       "with cancel-in-progress: false")
        if reachable:
            cond = str(job.get("if", "")).strip()
            cond = re.sub(r"^\$\{\{\s*|\s*\}\}$", "", cond)
            guarded = (re.match(r"^github\.event_name == '(workflow_dispatch|schedule)'(\s*&&|$)", cond)
                       and "||" not in cond and "github.ref == 'refs/heads/main'" in cond)
            if not guarded:
                out.append(f"{name}: self-hosted jobs.{job_id} can run on {sorted(reachable)}: its if: must start "
                           "with github.event_name == 'workflow_dispatch' && and require github.ref == 'refs/heads/main'")
    return out


def problems(path: Path, text: str | None = None) -> list[str]:
    text = path.read_text(encoding="utf-8") if text is None else text
    doc = yaml.safe_load(text)
    if True in doc:
        doc["on"] = doc.pop(True)
    name = path.name
    return (pin_problems(text, name) + script_problems(doc, name) + checkout_problems(doc, name)
            + permission_problems(doc, name) + job_problems(doc, name))


def nightly_problems(doc: dict) -> list[str]:
    """The nightly's measure job covers every device x every shard, each on its own GPU of the device's runners."""
    out = []
    job = (doc.get("jobs") or {}).get("measure") or next(iter((doc.get("jobs") or {}).values()))
    shards = int((doc.get("env") or {}).get("SHARDS", 1))  # an unsharded nightly is one shard
    instances = job_instances(job)
    seen = {}
    for combo, inst in instances:
        device, shard = combo.get("device"), combo.get("shard")
        label = DEVICES.get(device)
        where = f"measure[{device}, shard {shard}]"
        if label is None or shard is None:
            out.append(f"{where}: not a device x shard combination: {combo}")
            continue
        run_labels = [x.lower() for x in labels(inst.get("runs-on"))]
        if "self-hosted" not in run_labels or label not in run_labels:
            out.append(f"{where}: runs on {run_labels}, not the {label} runners")
        others = set(DEVICES.values()) - {label}
        if others & set(run_labels):
            out.append(f"{where}: runs on {run_labels}, which names another device's runners")
        env = inst.get("env") or {}
        gpu = str(int(shard) - 1)
        for var in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"):
            if str(env.get(var)) != gpu:
                out.append(f"{where}: {var}={env.get(var)!r}, not GPU {gpu}")
        group = (inst.get("concurrency") or {}).get("group")
        if group != f"perfci-gpu-{label}-{gpu}":
            out.append(f"{where}: concurrency group {group!r}, not perfci-gpu-{label}-{gpu}")
        seen[(device, int(shard))] = seen.get((device, int(shard)), 0) + 1
    want = {(d, s) for d in DEVICES for s in range(1, shards + 1)}
    if shards < 1:
        out.append("env.SHARDS is not a number of shards")
    for missing in sorted(want - set(seen)):
        out.append(f"measure: no job for {missing[0]} shard {missing[1]}/{shards}")
    for extra in sorted(set(seen) - want):
        out.append(f"measure: a job for {extra[0]} shard {extra[1]} beyond SHARDS={shards}")
    for key, count in sorted(seen.items()):
        if count > 1:
            out.append(f"measure: {count} jobs for {key[0]} shard {key[1]}")
    return out


# --------------------------------------------------------------------------- the expander itself


def test_expand_matrix_follows_githubs_documented_include_example():
    # The example in GitHub's "Running variations of jobs in a workflow".
    matrix = {
        "fruit": ["apple", "pear"],
        "animal": ["cat", "dog"],
        "include": [
            {"color": "green"},
            {"color": "pink", "animal": "cat"},
            {"fruit": "apple", "shape": "circle"},
            {"fruit": "banana"},
            {"fruit": "banana", "animal": "cat"},
        ],
    }
    assert expand_matrix(matrix) == [
        {"fruit": "apple", "animal": "cat", "color": "pink", "shape": "circle"},
        {"fruit": "apple", "animal": "dog", "color": "green", "shape": "circle"},
        {"fruit": "pear", "animal": "cat", "color": "pink"},
        {"fruit": "pear", "animal": "dog", "color": "green"},
        {"fruit": "banana"},
        {"fruit": "banana", "animal": "cat"},
    ]


def test_expand_matrix_exclude_then_include():
    matrix = {"os": ["a", "b"], "v": [1, 2], "exclude": [{"os": "b", "v": 2}],
              "include": [{"os": "b", "v": 2, "x": True}]}
    # The excluded combination is gone before include runs, so the include adds it back as its own.
    assert expand_matrix(matrix) == [{"os": "a", "v": 1}, {"os": "a", "v": 2}, {"os": "b", "v": 1},
                                     {"os": "b", "v": 2, "x": True}]
    assert expand_matrix({"include": [{"a": 1}, {"a": 2}]}) == [{"a": 1}, {"a": 2}]


# --------------------------------------------------------------------------- the nightly


def test_nightly_expands_to_every_device_and_shard():
    doc = load(WORKFLOWS / "nightly-gpu.yml")
    assert nightly_problems(doc) == []
    shards = int(doc["env"]["SHARDS"])
    assert shards == len(doc["jobs"]["measure"]["strategy"]["matrix"]["shard"])
    assert len(job_instances(doc["jobs"]["measure"])) == len(DEVICES) * shards


def test_old_nightly_matrix_is_caught():
    """The workflow this replaced: three includes over `suite`, each overwriting the last one's runner."""
    doc = load(DATA / "old-nightly-gpu.yml")
    combos = expand_matrix(doc["jobs"]["perf"]["strategy"]["matrix"])
    assert [c["runner"] for c in combos] == [["self-hosted", "h200"]] * 2
    found = nightly_problems(doc)
    assert any("no job for gfx942 shard 1" in p for p in found)
    assert any("no job for gfx950" in p for p in found)


def test_a_shard_added_by_include_is_a_new_combination_not_a_change():
    doc = load(WORKFLOWS / "nightly-gpu.yml")
    doc["jobs"]["measure"]["strategy"]["matrix"]["include"].append({"device": "gfx942", "shard": 3, "gpu": 2})
    found = nightly_problems(doc)
    assert any("gfx942 shard 3 beyond SHARDS=2" in p for p in found), found


def test_nightly_verdict_covers_every_device_after_its_shards():
    doc = load(WORKFLOWS / "nightly-gpu.yml")
    verdict = doc["jobs"]["verdict"]
    instances = job_instances(verdict)
    assert sorted(c["device"] for c, _ in instances) == sorted(DEVICES)
    for combo, inst in instances:
        assert DEVICES[combo["device"]] in labels(inst["runs-on"]) and "self-hosted" in labels(inst["runs-on"])
        assert inst["concurrency"]["group"] == f"perfci-gpu-{DEVICES[combo['device']]}-0"
    # The measure job's device -> runner mapping is the verdict's.
    measure = {c["device"]: c["label"] for c, _ in job_instances(doc["jobs"]["measure"])}
    assert measure == {c["device"]: c["label"] for c, _ in instances} == DEVICES
    assert verdict["needs"] == "measure" and "!cancelled()" in str(verdict["if"])
    # Outputs per device: a matrix job's legs would overwrite a shared one.
    assert set(verdict["outputs"]) == {f"{kind}_{d}" for kind in ("confirmed", "close") for d in DEVICES}
    for key, value in verdict["outputs"].items():
        assert value == f"${{{{ steps.nightly.outputs.{key} }}}}"


def test_nightly_keeps_its_artifacts_after_the_steps_that_write_them():
    doc = load(WORKFLOWS / "nightly-gpu.yml")
    for job_id, writer, path in (("measure", "measure", "results/"), ("verdict", "perfci nightly", "nightly/")):
        names = [s.get("name") or s.get("uses", "") for s in steps(doc["jobs"][job_id])]
        upload = next(i for i, s in enumerate(steps(doc["jobs"][job_id]))
                      if str(s.get("uses", "")).startswith("actions/upload-artifact@") and s["with"]["path"] == path)
        assert names.index(writer) < upload, f"{job_id} uploads {path} before {writer!r} writes it"
        assert steps(doc["jobs"][job_id])[upload]["if"] == "always()"
    measure_run = next(s["run"] for s in steps(doc["jobs"]["measure"]) if s.get("name") == "measure")
    assert '--shard "$SHARD/$SHARDS"' in measure_run and "--log-json" in measure_run
    nightly_run = next(s["run"] for s in steps(doc["jobs"]["verdict"]) if s.get("id") == "nightly")
    assert "--shards" in nightly_run and "--history" in nightly_run and "summary.md" in nightly_run and "GITHUB_STEP_SUMMARY" in nightly_run


def test_nightly_triggers_and_the_jobs_that_write():
    doc = load(WORKFLOWS / "nightly-gpu.yml")
    assert triggers(doc) == {"schedule", "workflow_dispatch"}
    jobs = doc["jobs"]
    for job_id in ("history", "issue"):
        assert not self_hosted(jobs[job_id]["runs-on"]) and jobs[job_id]["needs"] == "verdict"
    assert "needs.verdict.outputs" in jobs["issue"]["if"]
    # The token appears in the history job's push step only.
    for step in steps(jobs["history"]):
        mentions = "github.token" in json.dumps(step) or "secrets." in json.dumps(step)
        assert mentions == (step.get("name") == "push"), step.get("name") or step.get("uses")


def test_only_the_named_jobs_write_and_self_hosted_jobs_only_read():
    writes = set()
    for path in workflow_files():
        doc = load(path)
        for job_id, job in doc["jobs"].items():
            perms = job.get("permissions") or {}
            for scope, level in perms.items():
                if level == "write":
                    writes.add((path.name, job_id, scope))
            if any(self_hosted(j.get("runs-on")) for _, j in job_instances(job)):
                assert all(level != "write" for level in perms.values()), f"{path.name}: self-hosted {job_id} writes"
    assert writes == WRITES


# --------------------------------------------------------------------------- the calibration


CALIBRATE = WORKFLOWS / "calibrate-gpu.yml"
AA_RUNS = ROOT / "benchmarks" / "results" / "h200-2026-11-30" / "aa"  # three A/A decode runs on the H200


def for_device(value, device: str):
    """``value`` with every ``${{ }}`` evaluated for ``inputs.device == device``.

    Knows only what calibrate-gpu.yml uses: ``inputs.device`` and ``||`` chains
    of ``inputs.device == 'X' && 'Y'`` terms and ``'Z'`` literals, evaluated as
    GitHub does (``a && b || c``: b when a holds and b is not empty, else c).
    """
    if isinstance(value, list):
        return [for_device(v, device) for v in value]
    if isinstance(value, dict):
        return {k: for_device(v, device) for k, v in value.items()}
    if not isinstance(value, str):
        return value

    def one(m: re.Match) -> str:
        expr = m.group(1)
        if expr == "inputs.device":
            return device
        terms = [t.strip() for t in expr.split("||")]
        for i, term in enumerate(terms):
            cond = re.fullmatch(r"inputs\.device == '([^']*)' && '([^']*)'", term)
            literal = re.fullmatch(r"'([^']*)'", term)
            if cond:
                if cond.group(1) == device and cond.group(2):
                    return cond.group(2)
                if i == len(terms) - 1:
                    return "false" if cond.group(1) != device else ""
            elif literal and i == len(terms) - 1:
                return literal.group(1)
            else:
                return m.group(0)  # not the device: left as it is
        return m.group(0)
    return EXPR.sub(one, value)


def calibrate_job(doc: dict | None = None) -> dict:
    doc = doc or load(CALIBRATE)
    assert set(doc["jobs"]) == {"calibrate"}
    return doc["jobs"]["calibrate"]


def test_calibrate_only_a_dispatch_starts_it_with_its_inputs():
    doc = load(CALIBRATE)
    assert triggers(doc) == {"workflow_dispatch"}
    inputs = doc["on"]["workflow_dispatch"]["inputs"]
    assert set(inputs) == {"device", "suite", "runs", "from_history", "commit"}
    assert inputs["device"]["type"] == "choice" and inputs["device"]["options"] == list(DEVICES)
    assert (inputs["suite"]["type"], inputs["suite"]["default"]) == ("string", "decode")
    assert (inputs["runs"]["type"], inputs["runs"]["default"]) == ("number", 5)
    assert (inputs["from_history"]["type"], inputs["from_history"]["default"]) == ("boolean", False)
    # Inputs reach the scripts through env: only (the rules test checks no ${{ }} is in a run:).
    env = calibrate_job(doc)["env"]
    for name, var in (("device", "DEVICE"), ("suite", "SUITE"), ("runs", "RUNS"),
                      ("from_history", "FROM_HISTORY"), ("commit", "COMMIT")):
        assert env[var] == f"${{{{ inputs.{name} }}}}"
    assert doc["permissions"] == {} and calibrate_job(doc)["permissions"] == {"contents": "read"}


def test_calibrate_runs_where_the_nightly_measures_gpu_0_of_each_device():
    """Per device: the runner labels, extras, GPU pinning and GPU-0 concurrency group of nightly's shard 1."""
    nightly = load(WORKFLOWS / "nightly-gpu.yml")
    shard1 = {c["device"]: (c, inst) for c, inst in job_instances(nightly["jobs"]["measure"]) if c["gpu"] == 0}
    verdict = {c["device"]: inst for c, inst in job_instances(nightly["jobs"]["verdict"])}
    job = calibrate_job()
    assert isinstance(job["timeout-minutes"], int) and job["timeout-minutes"] > 0
    for device, label in DEVICES.items():
        inst = for_device(job, device)
        combo, measure = shard1[device]
        assert labels(inst["runs-on"]) == labels(measure["runs-on"]) == ["self-hosted", "linux", label]
        group = inst["concurrency"]["group"]
        assert group == measure["concurrency"]["group"] == verdict[device]["concurrency"]["group"] \
            == f"perfci-gpu-{label}-0"
        for key in ("cancel-in-progress", "queue"):
            assert inst["concurrency"][key] == measure["concurrency"][key]
        assert inst["env"]["EXTRAS"] == combo["extras"]
        for var in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"):
            assert str(inst["env"][var]) == str(measure["env"][var]) == "0"
    # A device that is not one: no runner of any device takes it.
    assert labels(for_device(job, "gfx90a")["runs-on"])[-1] not in DEVICES.values()


def test_calibrate_reuses_the_nightly_steps_and_uploads_after_calibrating():
    nightly_text = (WORKFLOWS / "nightly-gpu.yml").read_text(encoding="utf-8")
    text = CALIBRATE.read_text(encoding="utf-8")
    # The same pinned actions, version comments included.
    for line in re.findall(r"uses: \S+ # .*", text):
        assert line in nightly_text, line
    job = calibrate_job()
    named = {s.get("name"): s for s in steps(job) if s.get("name")}
    nightly_install = next(s for s in steps(load(WORKFLOWS / "nightly-gpu.yml")["jobs"]["measure"])
                           if s.get("name", "").startswith("install perfci"))
    assert named[nightly_install["name"]]["run"] == nightly_install["run"]
    order = [s.get("name") or s.get("uses", "") for s in steps(job)]
    upload = next(i for i, s in enumerate(steps(job)) if str(s.get("uses", "")).startswith("actions/upload-artifact@"))
    assert order.index("perfci calibrate") < upload and steps(job)[upload]["if"] == "always()"
    assert steps(job)[upload]["with"]["path"] == "calibration/"
    assert named["measure the A/A runs"]["if"] == "${{ !inputs.from_history }}"
    assert named["take the A/A runs from perf-history"]["if"] == "inputs.from_history"
    history_checkout = [s for s in steps(job) if (s.get("with") or {}).get("ref") == "perf-history"]
    assert len(history_checkout) == 1 and history_checkout[0]["if"] == "inputs.from_history"


def _step_script(name: str) -> str:
    return next(s["run"] for s in steps(calibrate_job()) if s.get("name") == name)


FAKE_PERFCI = """\
#!{python}
# perfci, except that `perfci run` copies the next of $FAKE_AA to --out (and exits $FAKE_RC).
import os, shutil, sys
from pathlib import Path
args = sys.argv[1:]
if args[:1] == ["run"]:
    out = Path(args[args.index("--out") + 1])
    done = len(list(out.parent.glob("*.csv")))
    shutil.copy(os.environ["FAKE_AA"].split(os.pathsep)[done], out)
    Path(args[args.index("--log-json") + 1]).write_text("")
    sys.exit(int(os.environ.get("FAKE_RC", "0")))
os.execv(sys.executable, [sys.executable, "-m", "perfci", *args])
"""


@pytest.fixture
def runner(tmp_path):
    """Runs calibrate-gpu.yml's step scripts as the runner does (bash -eo pipefail), on this machine."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # Wrappers, not symlinks: a venv's python finds its site-packages only under its own path.
    python = bin_dir / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    fake = bin_dir / "perfci"
    fake.write_text(FAKE_PERFCI.format(python=sys.executable))
    fake.chmod(0o755)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    summary = tmp_path / "summary.md"
    summary.touch()
    base_env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path),
                "GITHUB_WORKSPACE": str(workspace), "GITHUB_STEP_SUMMARY": str(summary),
                "GITHUB_RUN_ID": "4242", "PAUSE_S": "0", "CUDA_VISIBLE_DEVICES": "0",
                "DEVICE": "h200", "SUITE": "decode", "RUNS": "3", "FROM_HISTORY": "false", "COMMIT": "",
                "FAKE_AA": "", "FAKE_RC": "0"}

    def run(name: str, cwd: Path | None = None, **env) -> subprocess.CompletedProcess:
        script = tmp_path / "step.sh"
        script.write_text(_step_script(name))
        return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                              cwd=cwd or workspace, env={**base_env, **env}, capture_output=True,
                              text=True, timeout=120)
    run.workspace, run.summary = workspace, summary
    return run


def _aa(*names: str) -> str:
    return ":".join(str(AA_RUNS / n) for n in names)


def test_calibrate_measures_then_writes_a_profile_and_the_commands_to_commit_it(runner):
    from perfci.compare.inputs import read_profile

    aa = _aa("decode-q1.csv", "decode-q2.csv", "decode-q3.csv")
    assert runner("check the inputs").returncode == 0
    measured = runner("measure the A/A runs", cwd=ROOT, FAKE_AA=aa)
    assert measured.returncode == 0, measured.stdout + measured.stderr
    runs = sorted(p.name for p in (runner.workspace / "calibration" / "runs").glob("*.csv"))
    assert runs == ["aa-01.csv", "aa-02.csv", "aa-03.csv"]
    done = runner("perfci calibrate")
    assert done.returncode == 0, done.stdout + done.stderr
    profile = read_profile(str(runner.workspace / "calibration" / "noise-profile.json"))
    assert profile.arch == "sm_90" and 0 < profile.floor_pct < 100
    summary = runner.summary.read_text()
    assert f"Floor: **{profile.floor_pct}%**" in summary
    assert "- run 3 of 3, `perfci run decode`: exit 0" in summary
    for line in ("gh run download 4242 --name noise-profile-h200 --dir noise-profile-h200",
                 "cp noise-profile-h200/noise-profile.json baselines/h200/noise-profile.json",
                 "git add baselines/h200/noise-profile.json", "git commit -m"):
        assert line in summary
    # A run with a broken case still counts; a bad-input exit stops the measuring.
    assert "::warning::run 1" in runner("measure the A/A runs", cwd=ROOT, FAKE_AA=aa + ":" + aa, FAKE_RC="1").stdout
    stopped = runner("measure the A/A runs", cwd=ROOT, FAKE_AA=aa + ":" + aa, FAKE_RC="2")
    assert stopped.returncode == 2 and "run 1: perfci run exited 2; stopping" in stopped.stdout


def test_calibrate_refuses_what_is_not_a_profile_of_this_device(runner):
    aa = _aa("decode-q1.csv", "decode-q2.csv", "decode-q3.csv")
    runner("measure the A/A runs", cwd=ROOT, FAKE_AA=aa)
    # The H200's runs on the gfx942 runners: a mislabelled runner.
    wrong = runner("perfci calibrate", DEVICE="gfx942")
    assert wrong.returncode == 2 and "not gfx942's gfx942" in wrong.stdout
    # The same run twice is no A/A pair: perfci calibrate's own refusal, its exit code.
    runs = runner.workspace / "calibration" / "runs"
    for p in runs.glob("*.csv"):
        p.unlink()
    for i in (1, 2):
        shutil.copy(AA_RUNS / "decode-q1.csv", runs / f"aa-0{i}.csv")
    same = runner("perfci calibrate")
    assert same.returncode == 2 and "perfci calibrate refused these runs (exit 2)" in same.stdout
    assert "**perfci calibrate exit 2**: no profile." in runner.summary.read_text()


def test_calibrate_from_history_takes_the_last_runs_of_the_suite_and_commit(runner):
    from perfci.history.store import add_runs

    store = runner.workspace / "perf-history" / "h200"
    add_runs(store, [str(AA_RUNS / n) for n in ("decode-q1.csv", "prefill-q1.csv", "decode-q2.csv", "decode-q3.csv")])
    env = {"FROM_HISTORY": "true", "RUNS": "2", "COMMIT": "550444fbd733"}
    assert runner("check the inputs", **env).returncode == 0
    took = runner("take the A/A runs from perf-history", **env)
    assert took.returncode == 0, took.stdout + took.stderr
    runs = sorted(p.name for p in (runner.workspace / "calibration" / "runs").glob("*.csv"))
    assert len(runs) == 2 and all("_decode_550444fbd733_" in r for r in runs)
    assert runs[0].startswith("20261130T190513Z")  # the newest two, not the oldest
    assert runner("perfci calibrate", **env).returncode == 0
    # Fewer than asked: a warning; another commit's runs only: none to take.
    assert "::warning::only 3 decode runs" in runner("take the A/A runs from perf-history", **{**env, "RUNS": "5"}).stdout
    none = runner("take the A/A runs from perf-history", **{**env, "COMMIT": "0123456789ab"})
    assert none.returncode == 2 and "holds 0 decode runs of 0123456789ab" in none.stdout


@pytest.mark.parametrize("bad", [{"RUNS": "1"}, {"RUNS": "11"}, {"RUNS": "5;true"}, {"SUITE": "decode; rm -rf ~"},
                                 {"SUITE": "-h"}, {"DEVICE": "gfx90a"}, {"COMMIT": "main", "FROM_HISTORY": "true"},
                                 {"COMMIT": "0123456"}])
def test_calibrate_refuses_bad_inputs(runner, bad):
    checked = runner("check the inputs", **bad)
    assert checked.returncode == 2 and "::error::" in checked.stdout


def test_zizmor_finds_nothing_in_the_calibration_at_either_persona():
    """The directory-wide zizmor tests cover it; this names it, so it is not left out unseen."""
    for persona in ("regular", "pedantic"):
        findings = zizmor_findings("--persona", persona, str(CALIBRATE.relative_to(ROOT)))
        assert findings == [], _where(findings)


# --------------------------------------------------------------------------- the rules, on every workflow


@pytest.mark.parametrize("path", workflow_files(), ids=lambda p: p.name)
def test_workflow_keeps_the_rules(path):
    assert problems(path) == []


def test_perf_pr_self_hosted_job_runs_only_from_a_dispatch_of_main():
    doc = load(WORKFLOWS / "perf-pr.yml")
    jobs = doc["jobs"]
    hosted = {job_id for job_id, job in jobs.items() if self_hosted(job["runs-on"])}
    assert hosted == {"confirm"}
    assert "pull_request_target" not in triggers(doc)
    request = jobs["request"]["if"]
    assert "github.event.label.name == 'perf-check'" in request
    assert "github.event.pull_request.head.repo.full_name == github.repository" in request
    assert jobs["confirm"]["needs"] == "resolve"  # which refuses a PR from a fork


def test_perf_pr_compiles_the_head_with_main_s_perfci():
    """The compile step runs the venv's perfci (installed from main) in the head's worktree: nothing of
    the head is put on PYTHONPATH, so perfci's code is main's and only the head's kernels are planned."""
    job = load(WORKFLOWS / "perf-pr.yml")["jobs"]["confirm"]
    script = next(s["run"] for s in steps(job) if s.get("name") == "compiled resources of the head against baselines/compile")
    assert "PYTHONPATH" not in script and "python -m perfci" not in script
    assert '(cd "$tree" && perfci compile decode' in script
    assert "What the self-hosted job trusts of the PR" in DOCS.read_text(encoding="utf-8")


def test_old_workflows_are_caught():
    found = problems(DATA / "old-nightly-gpu.yml") + problems(DATA / "old-ci.yml")
    text = "\n".join(found)
    assert "actions/checkout@v4 is not pinned" in text
    assert "actions/upload-artifact@v4 is not pinned" in text
    assert "top-level permissions is 'missing'" in text
    assert "checkout without persist-credentials: false" in text
    assert "has ${{ }} inside run:" in text  # ${{ matrix.suite }} in the old measure step
    assert "needs concurrency" in text


PLANTS = {
    "a tag-pinned action": ("actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1 # v7.0.1",
                            "actions/checkout@v7.0.1", "not pinned to a full commit SHA"),
    "a SHA without its version": ("@3d3c42e5aac5ba805825da76410c181273ba90b1 # v7.0.1",
                                  "@3d3c42e5aac5ba805825da76410c181273ba90b1", "without its version"),
    "a persisted credential": ("persist-credentials: false", "persist-credentials: true",
                               "without persist-credentials: false"),
    "an event field in a script": ('rm -rf "$GITHUB_WORKSPACE/results"',
                                   'echo "${{ github.event.head_commit.message }}"', "inside run:"),
    "broad permissions": ("permissions: {}", "permissions: write-all", "top-level permissions"),
    "a job without a timeout": ("    timeout-minutes: 120\n", "", "has no timeout-minutes"),
    "a fork-reachable trigger": ("  workflow_dispatch:\n", "  workflow_dispatch:\n  pull_request:\n",
                                 "can run on ['pull_request']"),
    "pull_request_target": ("  workflow_dispatch:\n", "  workflow_dispatch:\n  pull_request_target:\n",
                            "triggered by pull_request_target"),
    "no GPU concurrency": ("      group: perfci-gpu-${{ matrix.label }}-${{ matrix.gpu }}\n      cancel-in-progress: false",
                           "      group: perfci-gpu-${{ matrix.label }}-${{ matrix.gpu }}\n      cancel-in-progress: true",
                           "needs concurrency"),
}


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_a_planted_fault_in_the_nightly_is_caught(plant):
    old, new, message = PLANTS[plant]
    path = WORKFLOWS / "nightly-gpu.yml"
    text = path.read_text(encoding="utf-8")
    assert old in text
    found = problems(path, text.replace(old, new, 1))
    assert any(message in p for p in found), found


def test_an_unguarded_self_hosted_job_in_the_pr_workflow_is_caught():
    path = WORKFLOWS / "perf-pr.yml"
    text = path.read_text(encoding="utf-8")
    guard = "    if: github.event_name == 'workflow_dispatch' && github.ref == 'refs/heads/main'\n"
    assert guard in text
    for weaker in ("", "    if: github.event_name == 'workflow_dispatch'\n",
                   "    if: github.event_name == 'workflow_dispatch' && github.ref == 'refs/heads/main' || true\n",
                   "    if: github.event.pull_request.head.repo.full_name == github.repository\n"):
        found = problems(path, text.replace(guard, weaker, 1))
        assert any("self-hosted jobs.confirm can run on ['pull_request']" in p for p in found), (weaker, found)


# --------------------------------------------------------------------------- zizmor


def _zizmor() -> str:
    found = shutil.which("zizmor") or shutil.which("zizmor", path=str(Path(sys.executable).parent))
    if not found:
        pytest.skip("zizmor is not installed (it is in the test extra: pip install -e '.[test]')")
    return found


def zizmor_findings(*args: str) -> list[dict]:
    result = subprocess.run([_zizmor(), "--offline", "--no-progress", "--no-exit-codes", "--format", "json", *args],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout)


def _where(findings: list[dict]) -> list[str]:
    out = []
    for f in findings:
        loc = f["locations"][0]
        path = loc["symbolic"]["key"].get("Local", {}).get("verbatim_path", "?")
        row = loc.get("concrete", {}).get("location", {}).get("start_point", {}).get("row", -1) + 1
        out.append(f"{f['ident']} at {path}:{row}: {f['desc']}")
    return out


def test_zizmor_finds_nothing_at_the_default_persona():
    findings = zizmor_findings(".github/workflows")
    assert findings == [], _where(findings)


def test_zizmor_pedantic_findings_are_the_explained_ones():
    findings = zizmor_findings("--persona", "pedantic", ".github/workflows")
    unexplained = [f for f in findings if f["ident"] not in PEDANTIC_KEPT]
    assert unexplained == [], _where(unexplained)
    text = DOCS.read_text(encoding="utf-8")
    for ident in PEDANTIC_KEPT:
        assert ident in text, f"docs/ci.md does not explain the kept pedantic finding {ident}"


def test_zizmor_still_sees_the_old_nightly():
    """The same call on the workflow this replaced: proof the check above is not vacuous."""
    idents = {f["ident"] for f in zizmor_findings(str(DATA / "old-nightly-gpu.yml"))}
    assert {"unpinned-uses", "artipacked", "excessive-permissions"} <= idents


def test_the_triage_workflow_takes_a_collaborators_comment_on_a_nightly_issue_only():
    path = WORKFLOWS / "perfci-triage.yml"
    doc = load(path)
    assert triggers(doc) == {"issue_comment"} and doc["on"]["issue_comment"]["types"] == ["created"]
    job = doc["jobs"]["record"]
    cond = " ".join(str(job["if"]).split())
    assert ("contains(fromJSON('[\"OWNER\", \"MEMBER\", \"COLLABORATOR\"]'), "
            "github.event.comment.author_association)") in cond
    assert "||" not in cond and "github.event.issue.pull_request == null" in cond
    assert "startsWith(github.event.issue.title, '[perfci-nightly ')" in cond
    assert not self_hosted(job["runs-on"])
    # the comment reaches steps as an env value only, never inside a script or a with:
    assert job["env"]["COMMENT"] == "${{ github.event.comment.body }}"
    text = path.read_text(encoding="utf-8")
    assert text.count("github.event.comment.body") == 2  # the if: and the env: entry
    # the one zizmor finding kept is the trigger itself, on its line
    ignores = [line for line in text.splitlines() if "zizmor: ignore" in line]
    assert ignores == ["  issue_comment:  # zizmor: ignore[dangerous-triggers] a collaborator check gates the only job"]
    for persona in ("regular", "pedantic"):
        findings = zizmor_findings("--persona", persona, str(path.relative_to(ROOT)))
        assert findings == [], _where(findings)


def test_a_triage_workflow_without_the_collaborator_check_is_caught_by_zizmor(tmp_path):
    text = (WORKFLOWS / "perfci-triage.yml").read_text(encoding="utf-8")
    weak = text.replace("  issue_comment:  # zizmor: ignore[dangerous-triggers] a collaborator check gates the only job",
                        "  issue_comment:")
    weak = weak.replace('          python3 - <<\'PY\'\n          import json, os, re\n',
                        '          echo "${{ github.event.comment.body }}"\n          python3 - <<\'PY\'\n'
                        '          import json, os, re\n', 1)
    (tmp_path / "perfci-triage.yml").write_text(weak, encoding="utf-8")
    idents = {f["ident"] for f in zizmor_findings(str(tmp_path / "perfci-triage.yml"))}
    assert {"dangerous-triggers", "template-injection"} <= idents
