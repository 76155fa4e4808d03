"""The deps layer: built for python3.13 on arm64 (Lambda's platform), and small.

The session builds it with layers/build.py if it is missing or stale (pip fetches the wheels from
the package index); otherwise the cached build under build/ is used as it is.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from infra.packaging import SHARED_LAYER_DIR
from layers import build

#: Lambda's limit for a function and all its layers, unzipped.
LAMBDA_UNZIPPED_LIMIT_MB = 250
#: What the two layers may take together: well under half the limit, room for the code.
LAYERS_BUDGET_MB = 100
#: Amazon Linux 2023, under the python3.13 runtime, ships glibc 2.34.
RUNTIME_GLIBC = (2, 34)
ELF_MAGIC = b"\x7fELF"
ELF_MACHINE_AARCH64 = 183
_MANYLINUX = re.compile(r"^manylinux_(\d+)_(\d+)_aarch64$")
_LEGACY_MANYLINUX = {"manylinux2014_aarch64": (2, 17)}


@pytest.fixture(scope="module")
def site() -> Path:
    build.build()
    return build.DEPS_SITE_DIR


def _tags(wheel_file: Path) -> list[str]:
    lines = wheel_file.read_text(encoding="utf-8").splitlines()
    return [line.split(":", 1)[1].strip() for line in lines if line.startswith("Tag:")]


def _runs_on_lambda(tag: str) -> bool:
    interpreter, abi, platform = tag.split("-")
    if platform == "any":
        return abi == "none" and interpreter.startswith("py")
    match = _MANYLINUX.match(platform)
    glibc = (int(match[1]), int(match[2])) if match else _LEGACY_MANYLINUX.get(platform)
    if glibc is None or glibc > RUNTIME_GLIBC:
        return False
    return interpreter == "cp313" and abi in {"cp313", "abi3", "none"}


def _size_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 1_000_000


def test_every_wheel_in_the_layer_targets_python313_on_linux_arm64(site: Path) -> None:
    wheels = sorted(site.glob("*.dist-info/WHEEL"))
    assert len(wheels) >= len(build.runtime_dependencies())
    wrong = {w.parent.name: _tags(w) for w in wheels if not any(map(_runs_on_lambda, _tags(w)))}
    assert wrong == {}


def test_every_native_library_is_built_for_aarch64(site: Path) -> None:
    libraries = [p for p in site.rglob("*.so*") if p.is_file()]
    assert libraries, "psycopg-binary and pydantic-core ship native code"
    for library in libraries:
        header = library.read_bytes()[:20]
        assert header[:4] == ELF_MAGIC, library
        assert int.from_bytes(header[18:20], "little") == ELF_MACHINE_AARCH64, library


def test_layers_stay_far_below_lambdas_unzipped_limit(site: Path) -> None:
    total = _size_mb(site) + _size_mb(SHARED_LAYER_DIR)
    assert total < LAYERS_BUDGET_MB < LAMBDA_UNZIPPED_LIMIT_MB


def test_layer_ships_bytecode_for_the_target_python(site: Path) -> None:
    assert list((site / "pydantic").glob("__pycache__/*.cpython-313.pyc"))
    assert not (site / "bin").exists()


def test_pip_is_told_the_lambda_platform_and_binary_wheels_only(tmp_path: Path) -> None:
    command = build.pip_command(tmp_path, ["psycopg[binary]>=3.2"])

    joined = " ".join(command)
    assert "--platform manylinux_2_28_aarch64" in joined
    assert "--platform manylinux2014_aarch64" in joined
    assert "--only-binary=:all:" in command
    assert "--python-version 3.13" in joined
    assert "--implementation cp" in joined
    assert f"--target {tmp_path}" in joined


def test_an_up_to_date_layer_is_not_rebuilt(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_pip(*args: object, **kwargs: object) -> None:
        raise AssertionError("pip must not run for an up-to-date layer")

    monkeypatch.setattr(subprocess, "run", no_pip)

    assert build.build() == build.DEPS_LAYER_DIR


def test_a_changed_dependency_list_makes_the_layer_stale(
    site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert build.is_up_to_date()
    monkeypatch.setattr(build, "runtime_dependencies", lambda: ["pydantic>=2.99"])

    assert not build.is_up_to_date()
