"""What the system tests need from the machine, how to tell it is here, and how to install it.

A test calls `require(NAME)`: where the thing is missing it skips with the install line, or, where
services are required (CI=true or `pytest --require-services`), it fails, so CI can never pass by
skipping. `.ci/run` installs all of them.
"""

from __future__ import annotations

import functools
import glob
import os
import pwd
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

SBIN = "/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class Service:
    """A thing some system tests need: `missing()` says why it is not usable here, or None."""

    name: str
    install: str
    missing: Callable[[], str | None]


def postgres_bin() -> Path | None:
    """The folder of PostgreSQL's server programs (initdb, pg_ctl): on PATH, else Debian's newest version."""
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).parent
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    return Path(found[-1]).parent if found else None


def _postgres_missing() -> str | None:
    if postgres_bin() is None:
        return "no initdb on PATH or under /usr/lib/postgresql/*/bin"
    if os.geteuid() == 0:  # the server refuses root: the tests run it as the postgres user
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no postgres user to run the server as"
        if shutil.which("runuser", path=SBIN) is None:
            return "running as root without runuser (util-linux) to start the server as postgres"
    return None


def chromium_path() -> str | None:
    return next(filter(None, (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome"))), None)


def _chromium_missing() -> str | None:
    return None if chromium_path() else "no chromium, chromium-browser or google-chrome on PATH"


def _slurm_missing() -> str | None:
    import slurm_cluster

    return slurm_cluster.missing()


def _setpriv_missing() -> str | None:
    # chmod 000 does not stop root; as root the unreadable-file tests drop root's override with setpriv.
    if os.geteuid() != 0 or shutil.which("setpriv", path=SBIN):
        return None
    return "running as root without setpriv (util-linux): chmod 000 does not stop root's reads"


def _mount_missing() -> str | None:
    # A real file system that fills up: a small tmpfs, which only root may mount.
    if os.geteuid() != 0:
        return "mounting a small tmpfs needs root"
    return None if shutil.which("mount", path=SBIN) else "no mount (util-linux)"


def _torch_missing() -> str | None:
    from importlib import metadata

    try:
        metadata.version("torch")  # without importing it (seconds, and refused inside unit tests)
    except metadata.PackageNotFoundError:
        return "torch is not installed in this environment"
    return None


@functools.cache
def _registry_missing() -> str | None:
    # Tests that build a fresh environment take packages from pip's configured index.
    import subprocess
    import sys

    try:
        asked = subprocess.run(
            [sys.executable, "-m", "pip", "index", "versions", "pip"], capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired:
        return "pip's package index did not answer in 60 s"
    return None if asked.returncode == 0 else f"pip's package index is not reachable: {asked.stderr.strip()[-200:]}"


SERVICES = {
    s.name: s
    for s in (
        Service("postgres", "apt-get install -y postgresql", _postgres_missing),
        Service("chromium", "apt-get install -y chromium", _chromium_missing),
        Service(
            "slurm",
            "apt-get install -y --no-install-recommends slurmctld slurmd slurm-client munge (as root)",
            _slurm_missing,
        ),
        Service("setpriv", "apt-get install -y util-linux", _setpriv_missing),
        Service("mount", "run the tests as root, with util-linux's mount", _mount_missing),
        Service(
            "torch",
            "pip install torch --index-url https://download.pytorch.org/whl/cpu && pip install -e '.[torch]'",
            _torch_missing,
        ),
        Service("registry", "a network route to pip's package index (pip config list)", _registry_missing),
    )
}


# Installed into an environment, not onto the machine: a test that needs one says so when it runs.
PACKAGES = ("torch", "registry")


def missing_here(machine_only: bool = False) -> list[tuple[Service, str]]:
    """The services this machine lacks, each with why (the package index is never asked here: the
    network). `machine_only`: leave out what a Python environment lacks (torch), which a CI job
    in an environment of its own (the lower bounds' unit tier) need not have.
    """
    left_out = PACKAGES if machine_only else ("registry",)
    found = ((service, service.missing()) for name, service in SERVICES.items() if name not in left_out)
    return [(service, why) for service, why in found if why is not None]


# Set from the command line by conftest.pytest_configure.
REQUIRED = {"value": False}


def required() -> bool:
    """Whether a missing service fails the test instead of skipping it."""
    return REQUIRED["value"] or os.environ.get("CI", "").lower() == "true"


def require(name: str) -> None:
    """Skip (naming the install command) or, where services are required, fail when `name` is missing."""
    service = SERVICES[name]
    why = service.missing()
    if why is None:
        return
    line = f"{name} missing ({why}); install: {service.install}"
    if required():
        pytest.fail(f"{line} [services are required: CI=true or --require-services]", pytrace=False)
    pytest.skip(line)
