"""What the sandbox asks of a run's mock web session, as a type.

The sandbox sits below mockweb/ and never imports it; mockweb.session.WebSession provides these
hooks, and the provider, the golden builder and the forks call them through this Protocol.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from shinken.bundles.model import Bundle

if TYPE_CHECKING:
    from shinken.sandbox.container import Container

SID_FILE = "/tmp/task_web_sid"  # where release setups keep their sid and rewards read it


class WebHooks(Protocol):
    @property
    def network_mode(self) -> str:
        """Docker network_mode of web-task containers."""
        ...

    def record(self, box: Container, bundle: Bundle) -> dict[str, Any]:
        """Write the golden's hub state into the build container; the summary kept in its metadata."""
        ...

    def setup_sid(self, box: Container) -> str | None:
        """The sid a setup run in `box` wrote, or None."""
        ...

    def new_sid(self) -> str: ...

    def restore(self, box: Container, sid: str) -> bool:
        """Give a fork the sid `sid` holding the golden's hub state; False when there is none."""
        ...

    def seal(self, sid: str) -> None:
        """Make `sid` a rollout's own: writes that reset or replace its state then need its key."""
        ...

    def reset(self, box: Container, sid: str) -> list[str]:
        """Reset a fork's sid in every app the golden recorded state in; the apps reset."""
        ...

    def lost(self) -> str | None:
        """Why the hub forks got their state from is no longer that hub (gone, stopped,
        restarted), or None while it runs."""
        ...

    def release(self, sid: str, *, keep_uploads: bool = False) -> None:
        """Remove a sid's state (never raises)."""
        ...
