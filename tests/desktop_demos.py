"""The release-shaped desktop demo tasks (demo/<uuid>/): what each one's setup leaves showing,
and the tier a default probe keeps it at. Shared by the tests that run them on the CUA image."""

from __future__ import annotations

CALC = "ced142d7-fb36-55fc-b1c5-2a60c026e7d0"
WRITER = "eba2fc99-802c-5a45-8a46-531d6cc0f05d"
IMPRESS = "9069338c-532a-5906-bae1-946ff21a370b"
EVINCE = "20ef0077-ea53-57ed-a5e1-41a934326e1e"
GIMP = "69270392-214a-51b2-9436-9aa6be21a1d9"
WRITER_DIALOG = "2d4740ff-ab49-5d11-9acc-ba0c7687d012"

# task id -> (a title every observation of its start state shows, the tier it is kept at)
DESKTOP_DEMOS = {
    CALC: ("expenses.xlsx - LibreOffice Calc", "relaunch"),
    WRITER: ("letter.docx - LibreOffice Writer", "relaunch"),
    IMPRESS: ("pitch.pptx - LibreOffice Impress", "relaunch"),
    EVINCE: ("invoice.pdf", "relaunch"),
    GIMP: ("[logo] (imported)", "relaunch"),
    # The setup opens Find and Replace after launching Writer: a relaunch shows no dialog.
    WRITER_DIALOG: ("Find and Replace", "reprovision"),
}


GNOME_TERMINAL = "97fe9fa2-e709-473f-9de6-56f532a9e128"
XFCE_TERMINAL = "170ec754-806f-4336-a6c2-aa43ef1a0e51"
XTERM = "1784994a-3e6a-4137-a271-67e1397d09ba"

# Terminal tasks (the release's OS / shell class): task id -> (the app the terminal window belongs
# to, a piece of its title, the tier it is kept at). Titles carry the host name (`user@<host>:
# ~/logs`), which every fork shares with its golden; gnome-terminal hands its window to the
# D-Bus-activated gnome-terminal-server and exits, so a fork runs the launcher again; xterm shows
# nothing to AT-SPI, so its window comes from the window manager's list.
TERMINAL_DEMOS = {
    GNOME_TERMINAL: ("gnome-terminal-server", ": ~/logs", "relaunch"),
    XFCE_TERMINAL: ("xfce4-terminal", ": ~/logs", "relaunch"),
    XTERM: ("xterm", "user@", "relaunch"),
}

VLC = "9c7baf09-f5d8-4e3c-93a8-22335f2b775d"
THUNDERBIRD = "e3bd8a69-ba20-48f2-a790-3ea60570c7c9"

# Media and mail tasks whose apps used to come up with an alert in the task image (VLC's "Errors"
# without an audio device; Thunderbird's "Account Setup" instead of the profile the setup wrote):
# task id -> (a title every observation of its start state shows, the tier it is kept at).
APP_DEMOS = {
    VLC: ("clip.mp4 - VLC media player", "relaunch"),
    # Thunderbird selects its start folder in the image's patched messenger.js whatever the timing,
    # and the record and the relaunch wait past its `Home` title (docs/tiers.md).
    THUNDERBIRD: ("Local Folders - Mozilla Thunderbird", "relaunch"),
}

ALL_DEMOS = (*DESKTOP_DEMOS, *TERMINAL_DEMOS, *APP_DEMOS)


def salted_copy(dest, ids, repo):
    """A private copy of demo tasks with a salted reward.py: its goldens get their own bundle
    hash, so a test or benchmark may delete them without touching anyone else's."""
    import shutil
    import uuid

    salt = uuid.uuid4().hex
    for tid in ids:
        shutil.copytree(repo / "demo" / tid, dest / tid)
        with open(dest / tid / "reward.py", "a", encoding="utf-8") as fh:
            fh.write(f"\n# salt {salt}\n")
    return dest
