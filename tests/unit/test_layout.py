"""The one owner of paths and of the atomic write."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from recon.layout import Layout, atomic_writer, raw_hour_folder, write_json_atomic

H = datetime(2026, 11, 20, 5, tzinfo=UTC)


def test_paths_follow_the_contract_layout(tmp_path: Path) -> None:
    lay = Layout(tmp_path, "p")
    assert raw_hour_folder(tmp_path, "t", H) == tmp_path / "t" / "dt=2026-11-20" / "hour=05"
    assert lay.events(H) == tmp_path / "_state/p/events/hour=2026-11-20T05"
    assert lay.decode_counters(H) == tmp_path / "_state/p/decode/hour=2026-11-20T05.json"
    assert lay.quarantine(H) == tmp_path / "quarantine/p/hour=2026-11-20T05"
    assert lay.manifest == tmp_path / "_state/p/merge/manifest.json"
    assert lay.saved_manifest(H) == tmp_path / "_state/p/merge/manifests/hour=2026-11-20T05.json"
    assert (
        lay.merge_run("r1", H, "a")
        == tmp_path / "_state/p/merge/data/run=r1/hour=2026-11-20T05/try=a"
    )
    assert lay.report(H) == tmp_path / "audit/p/2026-11-20T05/report.json"


def test_an_atomic_write_is_all_or_nothing(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "doc.json"
    write_json_atomic(target, {"v": 1})
    with pytest.raises(RuntimeError), atomic_writer(target) as f:
        f.write(b'{"v": 2, "half')
        raise RuntimeError("killed half way")
    assert target.read_text() == '{\n  "v": 1\n}'
    assert [p.name for p in target.parent.iterdir()] == ["doc.json"]  # no temp file left
    write_json_atomic(target, {"v": 3})
    assert '"v": 3' in target.read_text()
