"""The package's C modules, compiled by setuptools wherever the package is built: `pip install
.`, `pip wheel .`, and `make setup` (`scripts/build-native.sh`: `build_ext --inplace`). Each
format's one fast read and the dumps' content hashes (`recon.decode.formats.native` says
loudly when one is missing). Everything else about the package is in pyproject.toml."""

from setuptools import Extension, setup

_DIR = "recon/decode/formats"
_HEADERS = [
    f"{_DIR}/{h}"
    for h in ("_utf8.h", "_json.h", "_lane_rows.h", "_run_values.h", "vendor/xxhash.h")
]
_MODULES = ("_tencent_lane", "_debezium_lane", "_dataworks_lane", "_run_hashes")

setup(
    ext_modules=[
        Extension(
            f"recon.decode.formats.{name}",
            [f"{_DIR}/{name}.c"],
            depends=_HEADERS,
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"],
        )
        for name in _MODULES
    ]
)
