"""flashcheck's pytest plugin (registered by installing the package: entry point ``pytest11``).

- The ``flashcheck`` fixture: ``flashcheck.check(fn, ...)`` with the session's seed and case budget, its found
  fixtures under the test's tmp_path. ``@pytest.mark.flashcheck(properties=..., cases=...)`` sets a test's defaults.
- ``--flashcheck-cases N`` overrides every check's budget (a nightly run asks for more); ``--flashcheck-seed S``
  fixes the seed, which is otherwise drawn per session and printed in the header and in every failure.
- ``--flashcheck-fixtures`` (or ini ``flashcheck_fixtures = true``) collects fixture files (``*.json`` whose
  ``schema`` is ``flashcheck.fixture/1``) as tests: one per case and kernel (``--flashcheck-kernel``, repeatable;
  default the engine's kernels under test), a recorded known bug as a strict xfail, so that a fixed bug fails the
  run ("NOW PASSES") until its fixture is updated, and a case outside a kernel's contract as a skip.
"""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from . import _engine
from .check import check as _check
from .grid import Unsupported

SCHEMA = "flashcheck.fixture/1"


def pytest_addoption(parser):
    group = parser.getgroup("flashcheck", "flashcheck: attention kernels against an fp64 reference")
    group.addoption("--flashcheck-cases", type=int, default=None, metavar="N",
                    help="cases per property for every flashcheck check (overrides the tests' own budgets)")
    group.addoption("--flashcheck-seed", type=int, default=None, metavar="S",
                    help="seed of every flashcheck check (default: drawn per session, printed on failure)")
    group.addoption("--flashcheck-fixtures", action="store_true", default=None,
                    help="collect flashcheck fixture files (*.json) as tests, one per case and kernel")
    group.addoption("--flashcheck-kernel", action="append", default=[], metavar="K",
                    help="kernel the collected fixtures run on (repeatable; default: the engine's kernels under test)")
    parser.addini("flashcheck_fixtures", type="bool", default=False, help="collect flashcheck fixture files as tests")
    parser.addini("flashcheck_kernels", type="args", default=[], help="kernels the collected fixtures run on")


def pytest_configure(config):
    config.addinivalue_line("markers", "flashcheck(**kwargs): defaults for the flashcheck fixture's check() in this test")
    seed = config.getoption("--flashcheck-seed")
    config._flashcheck_seed = seed if seed is not None else random.randrange(1, 2**31)


def pytest_report_header(config):
    return f"flashcheck: seed {config._flashcheck_seed} (--flashcheck-seed to repeat)"


class Checker:
    """What the ``flashcheck`` fixture gives a test: ``check(fn, **kwargs)`` as flashcheck.check."""

    def __init__(self, request, out: Path):
        self._config = request.config
        marker = request.node.get_closest_marker("flashcheck")
        self._defaults = dict(marker.kwargs) if marker else {}
        self._out = out
        self.reports = []

    @property
    def seed(self) -> int:
        return self._config._flashcheck_seed

    def check(self, fn, **kwargs):
        __tracebackhide__ = True  # pytest shows the test's line and the finding, not this wrapper
        args = {**self._defaults, **kwargs}
        if "seed" not in args:
            args.update(seed=self.seed, _rerun=f"--flashcheck-seed {self.seed}")
        cases = self._config.getoption("--flashcheck-cases")
        if cases is not None:
            args["cases"] = cases
        args.setdefault("out", self._out / f"check-{len(self.reports)}")
        report = _check(fn, **args)
        self.reports.append(report)
        return report


@pytest.fixture
def flashcheck(request, tmp_path):
    return Checker(request, tmp_path)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A case outside the kernel's contract (grid.check_case) is a skip with the contract's reason, never a pass."""
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is not None and call.excinfo.errisinstance(Unsupported):
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"unsupported: {call.excinfo.value}")


# ---- Fixture files as tests -----------------------------------------------------------------------------------------

class KnownBug(AssertionError):
    """The kernel still fails as the fixture records: the strict xfail's expected exception."""


class NotAsRecorded(AssertionError):
    """The kernel did something the fixture does not record."""


def _collect_fixtures(config) -> bool:
    return bool(config.getoption("--flashcheck-fixtures") or config.getini("flashcheck_fixtures"))


def _kernels(config):
    named = config.getoption("--flashcheck-kernel") or config.getini("flashcheck_kernels")
    if named:
        return list(named)
    if not hasattr(config, "_flashcheck_kernels"):
        done = _engine.run(["list", "--json"])
        if done.returncode != 0:
            raise pytest.UsageError(f"flashcheck list --json exited {done.returncode}: {done.stderr.strip()}")
        config._flashcheck_kernels = [k["name"] for k in json.loads(done.stdout)]
    return config._flashcheck_kernels


def pytest_collect_file(file_path, parent):
    if file_path.suffix != ".json" or not _collect_fixtures(parent.config):
        return None
    try:
        head = json.loads(file_path.read_text(errors="replace"))
    except (OSError, ValueError):
        return None
    if isinstance(head, dict) and head.get("schema") == SCHEMA:
        return FixtureFile.from_parent(parent, path=file_path, fixture=head)
    return None


class FixtureFile(pytest.File):
    def __init__(self, *, fixture, **kwargs):
        super().__init__(**kwargs)
        self.fixture = fixture
        self._records = None

    def collect(self):
        for i, case in enumerate(self.fixture.get("cases") or []):
            expect = case.get("expect") or {}
            for kernel in _kernels(self.config):
                want = (expect.get(kernel) or {}).get("verdict", "pass")
                yield self._item(f"{case.get('name', i)}[{kernel}]", i, kernel, False, want,
                                 (expect.get(kernel) or {}).get("why"))
        # Model cases run on every profile of the fixture and every kernel ("hf-main@tiled-cpu"): their items are the
        # replay's records, which say which profile is expected to fail.
        model_cases = self.fixture.get("model_cases") or []
        if model_cases:
            for r in self.records():
                if r.get("model_case"):
                    name = model_cases[r["case"]].get("name", r["case"]) if r["case"] < len(model_cases) else r["case"]
                    yield self._item(f"{name}[{r['kernel']}]", r["case"], r["kernel"], True, r.get("expected", "pass"),
                                     r.get("reason"))

    def _item(self, name, index, kernel, model, want, why):
        item = FixtureCase.from_parent(self, name=name, index=index, kernel=kernel, model=model)
        if want not in ("pass", "unsupported"):
            why = (why or "").strip()
            item.add_marker(pytest.mark.xfail(
                strict=True, raises=KnownBug,
                reason=f"known bug, recorded as '{want}'{': ' + why if why else ''} (an XPASS here: the "
                       "recorded bug NOW PASSES: update the fixture)"))
        return item

    def records(self):
        """The replay of this file on every kernel, once: the items look their records up."""
        if self._records is None:
            args = ["replay", self.path, "--json", "--verbose"]
            for kernel in _kernels(self.config):
                args += ["--kernel", kernel]
            done = _engine.run(args)
            if done.returncode not in (0, 1):
                raise NotAsRecorded(f"flashcheck replay {self.path} exited {done.returncode}: {done.stderr.strip()}")
            self._records = json.loads(done.stdout)["records"]
        return self._records


class FixtureCase(pytest.Item):
    def __init__(self, *, index, kernel, model=False, **kwargs):
        super().__init__(**kwargs)
        self.index, self.kernel, self.model = index, kernel, model

    def runtest(self):
        mine = [r for r in self.parent.records()
                if r["case"] == self.index and r["kernel"] == self.kernel and bool(r.get("model_case")) == self.model]
        if not mine:
            pytest.skip(f"the replay has no record of {self.kernel} on this case")
        r = mine[0]
        what = f"{self.kernel}: {r.get('line') or r['verdict']}"
        if r["outcome"] == "unsupported":
            pytest.skip(f"unsupported: {r.get('reason', '')}")
        if r["outcome"] == "xfail" and r["as_expected"]:
            raise KnownBug(f"still fails as recorded (known bug): {what}")
        if r["outcome"] == "xpass":
            return  # the strict xfail turns this into a failure: the recorded bug is fixed
        if not r["as_expected"]:
            raise NotAsRecorded(f"{r['outcome']} where the fixture records {r.get('expected', 'pass')}: {what}")

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, (KnownBug, NotAsRecorded)):
            kernel = self.kernel.split("@")[-1]  # a model case's record names "profile@kernel"
            return f"{excinfo.value}\n  reproduce: flashcheck replay {self.path} --kernel {kernel} -v"
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, None, f"{self.path.name}::{self.name}"
