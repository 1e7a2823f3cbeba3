"""Exceptions users see as one line: what is wrong and how to fix it."""


class ReconError(Exception):
    """A user-facing error; the CLI prints `str(err)` alone, with no traceback."""


class ConfigError(ReconError):
    """A pipeline config (or command argument) is invalid."""


class DecodeError(Exception):
    """One raw record cannot be decoded; the message is the quarantine reason."""
