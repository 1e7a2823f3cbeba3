"""The package is built like any Python package with C extensions: `pip wheel .` compiles the
C modules into the wheel (no separate script a build could skip), and a missing one is said
loudly, never a silent slow path."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from recon.decode.formats import native

ROOT = Path(__file__).resolve().parents[2]
MODULES = {"_tencent_lane", "_debezium_lane", "_dataworks_lane", "_run_hashes"}


def test_a_wheel_holds_the_c_modules(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation",
         "-q", "-w", str(tmp_path)],
        check=True, capture_output=True,
    )  # fmt: skip
    (wheel,) = tmp_path.glob("recon_cdc-*.whl")
    with zipfile.ZipFile(wheel) as z:
        built = {
            Path(n).name.split(".")[0]
            for n in z.namelist()
            if n.startswith("recon/decode/formats/") and n.endswith(".so")
        }
    assert built == MODULES


def test_every_c_module_is_built_here() -> None:
    for name in sorted(MODULES):
        assert native.native_module(name) is not None, name


def test_a_missing_c_module_is_said_once_and_loudly(capsys: pytest.CaptureFixture[str]) -> None:
    assert native.native_module("_not_built") is None
    assert native.native_module("_not_built") is None
    err = capsys.readouterr().err
    assert err.count("WARNING: the C module _not_built is not built") == 1
    assert "make setup" in err and "slower" in err
