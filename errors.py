"""One error root for everything shinken reports, with exit codes scripts can rely on."""

from __future__ import annotations

# Exit codes (documented in docs/cli.md).
EXIT_OK = 0
EXIT_FAILED = 1  # the command ran but some work failed (e.g. gc could not remove something)
EXIT_USAGE = 2  # bad input: a path, a file, an option; nothing was changed
EXIT_ENVIRONMENT = 3  # the machine lacks something: Docker down, image missing
EXIT_INTERRUPTED = 130


class ShinkenError(Exception):
    """A failure explained in one line that names the file or task and what to do."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class EnvironmentProblem(ShinkenError):
    """The machine lacks something: Docker is not answering, an image is missing."""

    exit_code = EXIT_ENVIRONMENT


class WorkFailed(ShinkenError):
    """The command ran but some of its work failed (the one way a command exits 1)."""

    exit_code = EXIT_FAILED


class InternalError(WorkFailed):
    """A document shinken made fails its own schema: a bug in shinken, never written out."""
