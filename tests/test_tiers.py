"""The tiers hold: every test has exactly one, and a unit test cannot reach a framework or a process.

Each check runs pytest in this process (pytester) on a small test file under this project's conftest.
"""

from __future__ import annotations

import pytest
import services
from conftest import REPO

pytestmark = pytest.mark.unit
pytest_plugins = ("pytester",)


@pytest.fixture(autouse=True)
def _no_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    """The inner system tests would split the CPU into TensorFlow devices first: not in a unit test."""
    monkeypatch.setattr("sweep.train.devices.configure_replicas", lambda count: None)


def _project(pytester: pytest.Pytester, tests: str, *args: str) -> pytest.RunResult:
    """This project's conftest and pytest settings around `tests`, run by pytest in this process with `args`."""
    pytester.makeconftest((REPO / "tests" / "conftest.py").read_text(encoding="utf-8"))
    pytester.makepyprojecttoml((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    pytester.makepyfile(test_example=tests)
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", *(args or ("-m", "unit or integration or system")))


def test_a_test_without_a_tier_stops_the_session_before_anything_runs(pytester: pytest.Pytester) -> None:
    done = _project(
        pytester, "import pytest\n\n@pytest.mark.unit\ndef test_a():\n    pass\n\ndef test_b():\n    pass\n"
    )
    assert done.ret == pytest.ExitCode.USAGE_ERROR
    assert "test_example.py::test_b: none" in done.stderr.str()


def test_a_test_with_two_tiers_stops_the_session(pytester: pytest.Pytester) -> None:
    two = "import pytest\n\n@pytest.mark.unit\n@pytest.mark.system\ndef test_a():\n    pass\n"
    done = _project(pytester, two)
    assert done.ret == pytest.ExitCode.USAGE_ERROR
    assert "test_example.py::test_a: ['system', 'unit']" in done.stderr.str()


def test_a_mistyped_marker_is_an_error_not_a_test_in_the_default_run(pytester: pytest.Pytester) -> None:
    done = _project(pytester, "import pytest\n\n@pytest.mark.unti\ndef test_a():\n    pass\n")
    assert done.ret == pytest.ExitCode.INTERRUPTED
    assert "'unti' not found in `markers` configuration option" in done.stdout.str()


def test_a_unit_test_that_imports_a_framework_or_starts_a_process_fails(pytester: pytest.Pytester) -> None:
    tests = (
        "import subprocess, sys\nimport pytest\n\npytestmark = pytest.mark.unit\n\n"
        "def test_framework():\n    import jax._not_a_module_batchsweep\n\n"
        "def test_process():\n    subprocess.run([sys.executable, '-c', 'pass'])\n\n"
        "def test_plain():\n    assert sum([1, 2]) == 3\n"
    )
    done = _project(pytester, tests)
    done.assert_outcomes(passed=1, failed=2)
    out = done.stdout.str()
    assert "a unit test may not import jax" in out and "a unit test may not start a process" in out


MISSING_SERVICE = (
    "import pytest\nimport services\n\npytestmark = pytest.mark.system\n\n"
    "def test_needs_it(monkeypatch):\n"
    "    fake = services.Service('fake', 'apt-get install -y fake', lambda: 'not here')\n"
    "    monkeypatch.setitem(services.SERVICES, 'fake', fake)\n"
    "    services.require('fake')\n"
)


def test_a_missing_service_skips_with_its_install_line(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CI", raising=False)
    done = _project(pytester, MISSING_SERVICE)
    done.assert_outcomes(skipped=1)
    assert "fake missing (not here); install: apt-get install -y fake" in done.stdout.str()


@pytest.mark.parametrize("how", ["CI=true", "--require-services"])
def test_on_ci_a_missing_service_fails(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    monkeypatch.delenv("CI", raising=False)
    if how == "CI=true":
        monkeypatch.setenv("CI", "true")
    extra = [how] if how.startswith("--") else []
    done = _project(pytester, MISSING_SERVICE, "-m", "system", *extra)
    done.assert_outcomes(failed=1)
    assert "install: apt-get install -y fake [services are required" in done.stdout.str()


def test_the_default_run_names_what_the_system_tier_needs(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setitem(services.SERVICES, "fake", services.Service("fake", "apt-get install -y fake", lambda: "gone"))
    pytester.makepyfile(test_quick="import pytest\n\n@pytest.mark.unit\ndef test_quick():\n    pass\n")
    done = _project(pytester, MISSING_SERVICE, "-m", "not system")  # pyproject's default
    done.assert_outcomes(passed=1, deselected=1)
    assert done.ret == pytest.ExitCode.OK
    out = done.stdout.str()
    assert "1 system tests not run: pytest -m system, or bash .ci/run" in out
    assert "fake MISSING (gone); install: apt-get install -y fake" in out


def test_on_ci_the_default_run_fails_where_a_service_is_missing(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")
    monkeypatch.setitem(services.SERVICES, "fake", services.Service("fake", "apt-get install -y fake", lambda: "gone"))
    pytester.makepyfile(test_quick="import pytest\n\n@pytest.mark.unit\ndef test_quick():\n    pass\n")
    done = _project(pytester, MISSING_SERVICE, "-m", "not system")
    done.assert_outcomes(passed=1, deselected=1)
    assert done.ret == pytest.ExitCode.TESTS_FAILED
    assert "services are required here (CI=true or --require-services): the session fails" in done.stdout.str()


def test_on_ci_a_missing_package_fails_only_the_tests_that_need_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """torch is installed into an environment, not onto the machine: the lower bounds' unit tier runs on
    CI in an environment without it and passes; a test that needs torch still fails there.
    """
    monkeypatch.setenv("CI", "true")
    absent = services.Service("torch", "pip install torch", lambda: "absent")
    monkeypatch.setattr(services, "SERVICES", {"torch": absent})  # a machine with every machine service
    pytester.makepyfile(test_quick="import pytest\n\n@pytest.mark.unit\ndef test_quick():\n    pass\n")
    done = _project(pytester, "import pytest\n", "-m", "unit")
    done.assert_outcomes(passed=1, deselected=0)
    assert done.ret == pytest.ExitCode.OK
    needs = "import pytest\nimport services\n\npytestmark = pytest.mark.system\n\n"
    done = _project(pytester, needs + "def test_a():\n    services.require('torch')\n", "-m", "system")
    done.assert_outcomes(failed=1, deselected=1)
