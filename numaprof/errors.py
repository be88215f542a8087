"""The one exception family of numaprof: every user-facing failure is a NumaprofError.

The CLI prints ``numaprof: <message>`` on one line and exits with ``exit_code``;
``-v`` shows the traceback as well.
"""


class NumaprofError(Exception):
    """A failure to report to the user in one line."""

    exit_code = 1

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class ProfileError(NumaprofError):
    """A profile is missing, truncated, corrupted or of another format version."""

    exit_code = 2


class UsageError(NumaprofError):
    """Bad option values (unknown --target, inconsistent topology, ...)."""

    exit_code = 2
