"""Exceptions users see as one line: what is wrong and how to fix it."""

EXIT_USER_ERROR = 2
"""A command's or stage job's exit code for a user error (one line on stderr)."""
EXIT_VERDICT_FAIL = 3
"""`recon/jobs/stage.py audit`'s exit code when an hour's verdict is `fail`: an answer, which the
DAG's audit task does not retry; any other failure (exit 1, a traceback) is retried."""


class ReconError(Exception):
    """A user-facing error; the CLI prints `str(err)` alone, with no traceback."""


class ConfigError(ReconError):
    """A pipeline config (or command argument) is invalid; `key`: the config key it names (its
    line is added where the file is known)."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


class DecodeError(Exception):
    """One raw record cannot be decoded; the message is the quarantine reason."""


class NotDecodedError(ReconError):
    """A stage needs an hour the decode stage has not finished."""


class NotMergedError(ReconError):
    """A stage needs an hour the merge stage has not finished."""


class TableNotPublishedError(ReconError):
    """A table has no published version yet."""


class NoVersionAtHourError(ReconError):
    """A table has no published version at or before the hour asked for."""


class OutOfMemory(ReconError):
    """A stage ran out of memory: one line naming what ran out, the setting and the hour's size."""


class PipelineBusy(ReconError):
    """Another process is writing the pipeline's state (one writer per pipeline)."""


class ManifestError(ReconError):
    """The merge state's manifest is missing or unreadable while state exists."""


class NoSavedStateError(ReconError):
    """The merge state of an hour was not kept (or lost its files): rollback cannot restore it."""


def shortened(text: str, width: int = 120) -> str:
    """`text` on one line, cut to `width` characters (to quote it in an error message)."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."
