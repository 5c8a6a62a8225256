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
