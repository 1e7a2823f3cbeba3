"""The Airflow pool the pipelines' Spark stage tasks run in (`recon_spark` unless a pipeline's
`airflow.pool` names another): created where Airflow's database is set up (`recon demo`, the
tests' Airflow, compose's `airflow-init`) so that no stage task waits for a pool that does not
exist (Airflow leaves such a task unscheduled without an error).

    python -m recon.airflow.pool [NAME] [SLOTS]

creates the pool with SLOTS slots (default `RECON_SPARK_POOL_SLOTS`, else 2) when it is missing,
and leaves an existing pool as it is: slots an operator changed in the UI stay changed.
"""

from __future__ import annotations

import os
import sys

from recon.config import AirflowConfig

DEFAULT_POOL = AirflowConfig.pool
DEFAULT_SLOTS = 2
DESCRIPTION = "recon's Spark stage tasks: one slot per stage that may run at once on a worker"


def slots_from_env() -> int:
    raw = os.environ.get("RECON_SPARK_POOL_SLOTS", str(DEFAULT_SLOTS))
    if not raw.isdigit() or int(raw) < 1:
        raise SystemExit(f"RECON_SPARK_POOL_SLOTS={raw!r}: must be a whole number >= 1, e.g. 2")
    return int(raw)


def ensure(name: str = DEFAULT_POOL, slots: int | None = None) -> bool:
    """Create pool `name` when missing; True when it was created."""
    from airflow.models.pool import Pool

    if Pool.get_pool(name) is not None:
        return False
    Pool.create_or_update_pool(name, slots or slots_from_env(), DESCRIPTION, include_deferred=False)
    return True


def main(argv: list[str]) -> int:
    if len(argv) > 2 or (len(argv) == 2 and not argv[1].isdigit()):
        print("usage: python -m recon.airflow.pool [NAME] [SLOTS]", file=sys.stderr)
        return 2
    name = argv[0] if argv else DEFAULT_POOL
    made = ensure(name, int(argv[1]) if len(argv) == 2 else None)
    print(f"pool {name}: {'created' if made else 'exists, left as it is'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
