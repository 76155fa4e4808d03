"""Build the third-party dependencies layer for Lambda (python3.13 on arm64) without Docker.

pip downloads the wheels built for the Lambda platform (explicit `--platform` tags, binary only),
so the host's own platform never leaks into the layer. The result lands in
`build/layers/deps/python/`, the layer layout that CDK packages with `Code.from_asset`.

Run `python layers/build.py` (or `make layers`). It is idempotent: a stamp holds the hash of the
inputs (dependency list, platform, Python version) and the build is skipped when it matches.
`--force` rebuilds anyway.
"""

from __future__ import annotations

import argparse
import compileall
import hashlib
import json
import py_compile
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"
#: The folder CDK takes as the layer asset; its `python/` child becomes /opt/python in Lambda.
DEPS_LAYER_DIR = ROOT / "build" / "layers" / "deps"
DEPS_SITE_DIR = DEPS_LAYER_DIR / "python"
STAMP_FILE = DEPS_LAYER_DIR / ".build-stamp.json"

#: The Lambda runtime the layer targets (the CDK app declares the same runtime and architecture).
TARGET_PYTHON_VERSION = "3.13"
TARGET_ARCHITECTURE = "aarch64"
#: psycopg-binary 3.3 ships manylinux_2_28 wheels only; older packages still ship manylinux2014.
#: Both are satisfied by the Amazon Linux 2023 base of the python3.13 runtime (glibc 2.34).
TARGET_PLATFORMS = ("manylinux_2_28_aarch64", "manylinux2014_aarch64")

#: Deliberately shipped although the runtime has its own copy: pyproject pins boto3 so that the
#: layer, the tests and the CLI run the SDK the code was tested with, and AWS advises bundling the
#: SDK rather than relying on the runtime's, which is upgraded without notice. Powertools needs
#: boto3 at runtime (parameters, idempotency). The cost is size, which the layer test bounds.
#: List a distribution name here to leave it to the runtime instead.
EXCLUDED_DISTRIBUTIONS: frozenset[str] = frozenset()

#: Bumped when this script changes what it produces, so that old builds are not reused.
BUILD_FORMAT_VERSION = 2


def runtime_dependencies() -> list[str]:
    """The requirement strings of `[project.dependencies]`, minus the excluded distributions."""
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    deps = [str(dep) for dep in project["dependencies"]]
    return [dep for dep in deps if _distribution_name(dep) not in EXCLUDED_DISTRIBUTIONS]


def _distribution_name(requirement: str) -> str:
    name = requirement
    for separator in "[<>=!~ ;":
        name = name.split(separator, 1)[0]
    return name.strip().lower().replace("_", "-")


def build_inputs_digest() -> str:
    """What the layer is built from; the stamp stores it."""
    inputs = {
        "dependencies": runtime_dependencies(),
        "platforms": TARGET_PLATFORMS,
        "python": TARGET_PYTHON_VERSION,
        "format": BUILD_FORMAT_VERSION,
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def is_up_to_date() -> bool:
    """True when the layer folder exists and was built from the current inputs."""
    if not (STAMP_FILE.is_file() and DEPS_SITE_DIR.is_dir()):
        return False
    stamp = json.loads(STAMP_FILE.read_text(encoding="utf-8"))
    return bool(stamp.get("digest") == build_inputs_digest())


def pip_command(target: Path, requirements: list[str]) -> list[str]:
    """The pip invocation that fetches Lambda-platform wheels only."""
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-compile"]
    for platform in TARGET_PLATFORMS:
        command += ["--platform", platform]
    command += [
        "--implementation",
        "cp",
        "--python-version",
        TARGET_PYTHON_VERSION,
        "--only-binary=:all:",
        "--target",
        str(target),
        *requirements,
    ]
    return command


def _precompile(site: Path) -> None:
    """Ship bytecode so that cold starts do not compile: /opt is read-only in Lambda.

    Hash-based, unchecked .pyc files stay valid whatever timestamps the asset zip records.
    Bytecode is version specific, so this only runs on the target's minor version.
    """
    host_version = f"{sys.version_info.major}.{sys.version_info.minor}"
    if host_version != TARGET_PYTHON_VERSION:
        _say(f"host Python {host_version} is not {TARGET_PYTHON_VERSION}: no bytecode shipped")
        return
    compileall.compile_dir(
        site,
        quiet=1,
        workers=0,
        invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
    )


def build(*, force: bool = False) -> Path:
    """Build the layer folder unless it is up to date; return it."""
    if not force and is_up_to_date():
        _say(f"deps layer up to date in {DEPS_LAYER_DIR.relative_to(ROOT)}")
        return DEPS_LAYER_DIR
    staging = DEPS_LAYER_DIR.with_name(DEPS_LAYER_DIR.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    site = staging / "python"
    requirements = runtime_dependencies()
    _say(
        f"building deps layer for python{TARGET_PYTHON_VERSION}/{TARGET_ARCHITECTURE}: "
        + " ".join(requirements)
    )
    subprocess.run(pip_command(site, requirements), check=True)  # noqa: S603  # fixed argv
    # Console scripts are of no use in a layer and would carry the host's interpreter path.
    shutil.rmtree(site / "bin", ignore_errors=True)
    _precompile(site)
    stamp = {"digest": build_inputs_digest(), "requirements": requirements}
    (staging / STAMP_FILE.name).write_text(json.dumps(stamp, indent=2) + "\n", encoding="utf-8")
    # Swap only a finished build in, so that an interrupted run never looks up to date.
    shutil.rmtree(DEPS_LAYER_DIR, ignore_errors=True)
    staging.rename(DEPS_LAYER_DIR)
    _say(f"deps layer built in {DEPS_LAYER_DIR.relative_to(ROOT)}")
    return DEPS_LAYER_DIR


def _say(message: str) -> None:
    sys.stdout.write(f"layers: {message}\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--force", action="store_true", help="rebuild even if up to date")
    args = parser.parse_args(argv)
    build(force=args.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
