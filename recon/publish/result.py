"""What publishing a table's version leaves (the merge keeps it in its result)."""

from __future__ import annotations

from typing import NotRequired, TypedDict


class PublishResult(TypedDict):
    committed: bool
    snapshot_id: int | None
    files_added: NotRequired[int]
    files_removed: NotRequired[int]
    deletes_added: NotRequired[int]
    """Position-delete files added (merge-on-read: the rows the new ones replace)."""
    table: NotRequired[str]
    uncastable: NotRequired[dict[str, int]]
    """Column -> values that do not fit its published type (published as NULL)."""
    duplicate_keys: NotRequired[int]


class HistoryResult(TypedDict):
    """What an hour's commit to a table's history left (`recon.publish.history`)."""

    committed: bool
    versions_files: int
    """Data files added: the hour's versions, and earlier versions whose end changed."""
    deletes_added: int
    """Position-delete files added: the versions replaced or ended again."""
