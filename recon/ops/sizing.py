"""Is a run small? Decided before Spark starts, from file sizes and the manifest (no Spark: the
DAGs call it when a stage's spark-submit command is rendered).

A small run (a quiet hour, the demo) spends most of its time compiling, not computing: Java's
optimising JIT compiler (C2) and Spark's per-query code generation burn CPU on code that runs
over a few thousand rows. Measured on 2 cores, a 2k-message DataWorks hour in one `recon run`
(interleaved runs): 25.3 s and 44.5 CPU-seconds as before; 19.7 s and 25.5 CPU-seconds without
whole-stage code generation (`recon.spark.session.sized_for`, decided per stage) and with the
JVM's quick compiler only (`SMALL_RUN_JVM_OPTIONS`, decided per JVM, here; with the serial
garbage collector too since session 16). A 500k-message hour ran ~2 s slower with the quick
compiler only, so a run is small only well below that.
"""

from __future__ import annotations

from datetime import datetime

from recon.config import PipelineConfig
from recon.layout import dump_bytes
from recon.merge.manifest import load_manifest, state_rows

SMALL_RUN_BYTES = 4 * 1024 * 1024
"""Dump bytes of all the run's hours (a 100k-message DataWorks hour is ~9 MB of Parquet)."""
SMALL_RUN_STATE_ROWS = 100_000
"""State rows a merge may rewrite."""


def small_run(cfg: PipelineConfig, hours: list[datetime]) -> bool:
    """The run's dumps and the state it merges into are small (see the module's doc)."""
    if dump_bytes(cfg.raw_path, cfg.topics, hours) >= SMALL_RUN_BYTES:
        return False
    # an unreadable manifest counts as empty here: the merge refuses it with the fix
    return state_rows(load_manifest(cfg, allow_missing=True)) < SMALL_RUN_STATE_ROWS
