#!/usr/bin/env bash
# The generated protobuf code of the checkout in the current directory (a build output, never
# committed): recon/_proto/ from proto/*.proto, by the venv's grpc_tools (.venv in that
# checkout). Run by scripts/setup.sh, and by benchmarks.ab in the revisions it checks out.
set -euo pipefail
mkdir -p recon/_proto
.venv/bin/python -m grpc_tools.protoc -Iproto --python_out=recon/_proto proto/*.proto
touch recon/_proto/__init__.py
