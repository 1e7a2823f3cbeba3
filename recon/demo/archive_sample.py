"""The run setup trains the Spark class archive on (`recon.spark.class_archive`): two hours of
the demo's DataWorks sample. `make setup` runs this module."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from pathlib import Path

from recon.spark.class_archive import build
from recon.sparkconf import CDS_ARCHIVE as ARCHIVE


def sample_pipeline(work: Path) -> tuple[Path, str, str]:
    """Two hours of the demo's DataWorks sample (inserts, updates, deletes) and the demo's
    DataWorks pipeline over them (its tables, no snapshot), under `work`."""
    import yaml

    from recon.demo import sample
    from recon.demo.demo import DEMO_START, PIPELINES, write_dump
    from recon.formats import FORMAT_SPECS
    from recon.hours import format_hour

    hours = [DEMO_START, DEMO_START + timedelta(hours=1)]
    fmt = "dataworks_json"
    recs = sample.to_records(sample.ENCODERS[fmt](sample.workload(DEMO_START, 2)), "cds")
    write_dump(work / "raw", "cds", recs, FORMAT_SPECS[fmt].dump_kind, hours)
    demo = yaml.safe_load((PIPELINES / f"demo_{fmt}.yaml").read_text())
    cfg = {
        "name": "cds",
        "format": fmt,
        "raw_path": "raw",
        "topics": ["cds"],
        "warehouse": "warehouse",
        "start": f"{format_hour(DEMO_START)}:00:00Z",
        "tables": demo["tables"],
    }
    pipeline = work / "cds.yaml"
    pipeline.write_text(yaml.safe_dump(cfg))
    return pipeline, format_hour(hours[0]), format_hour(hours[1])


if __name__ == "__main__":
    try:
        built = build(sample_pipeline)
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:  # slower, not broken
        print(
            f"setup: no Spark class archive ({e}); Spark starts slower without it", file=sys.stderr
        )
        sys.exit(0)
    print(f"setup: Spark class archive {'built' if built else 'up to date'}: {ARCHIVE}")
