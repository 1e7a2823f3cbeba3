"""What a build of the package makes beyond pyproject.toml, wherever it is built (`pip install
.`, `pip wheel .`; `make setup` does the same in place: scripts/gen-proto.sh and
scripts/build-native.sh):

- the C modules: each format's one fast read and the dumps' content hashes
  (`recon.decode.formats.native` says loudly when one is missing);
- the protobuf code, `recon/_proto/`, generated from proto/*.proto by grpc_tools (a build
  requirement), never committed;
- the checkout's files an installed package needs, under `recon/_shipped/`: the demo pipelines,
  the DAG file and the pipeline YAML's schema (`recon.layout.shipped`).
"""

import shutil
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

SHIPPED = ["dags/recon_pipelines.py", "docs/reference/pipeline.schema.json"] + sorted(
    str(p) for p in Path("pipelines").glob("demo_*.yaml")
)


class BuildPy(build_py):
    def run(self) -> None:
        super().run()
        pkg = Path(self.build_lib) / "recon"
        out = pkg / "_proto"
        out.mkdir(parents=True, exist_ok=True)
        from grpc_tools import protoc

        protos = sorted(str(p) for p in Path("proto").glob("*.proto"))
        if protoc.main(["protoc", "-Iproto", f"--python_out={out}", *protos]) != 0:
            raise SystemExit("protoc failed on proto/*.proto")
        (out / "__init__.py").touch()
        for rel in SHIPPED:
            dest = pkg / "_shipped" / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(rel, dest)


_DIR = "recon/decode/formats"
_HEADERS = [
    f"{_DIR}/{h}"
    for h in ("_utf8.h", "_json.h", "_lane_rows.h", "_run_values.h", "vendor/xxhash.h")
]
_MODULES = ("_tencent_lane", "_debezium_lane", "_dataworks_lane", "_run_hashes")

setup(
    cmdclass={"build_py": BuildPy},
    ext_modules=[
        Extension(
            f"recon.decode.formats.{name}",
            [f"{_DIR}/{name}.c"],
            depends=_HEADERS,
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"],
        )
        for name in _MODULES
    ],
)
