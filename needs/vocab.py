"""Static vocabularies: app_type -> desktop_apps, file types -> apps, GUI programs -> apps,
import names -> distributions, stdlib by Python version. Names follow /work/notes/images.md."""

from __future__ import annotations

import sys
from dataclasses import dataclass

DESKTOP_APPS = (
    "libreoffice_calc", "libreoffice_writer", "libreoffice_impress", "gimp", "vlc", "vscode", "chrome",
    "chromium", "firefox", "blender", "openshot", "thunderbird", "zenity", "xterm", "gedit", "evince", "okular",
    "inkscape", "pdf_viewer", "gnome_terminal", "file_manager", "xfce4_terminal",
)
BROWSERS = frozenset({"chrome", "chromium", "firefox"})
TERMINAL = ("gnome_terminal", "xterm", "xfce4_terminal")  # a task that opens "a terminal" is served by either
PDF = ("pdf_viewer", "evince", "okular")  # any of them shows a PDF
LIBREOFFICE = ("libreoffice_calc", "libreoffice_writer", "libreoffice_impress")

# app_type token -> alternatives (any one satisfies). () means "no desktop app needed".
APP_TYPE: dict[str, tuple[str, ...]] = {a: (a,) for a in DESKTOP_APPS}
APP_TYPE.update({
    "calc": ("libreoffice_calc",), "excel": ("libreoffice_calc",), "spreadsheet": ("libreoffice_calc",),
    "libreoffice_spreadsheet": ("libreoffice_calc",), "writer": ("libreoffice_writer",),
    "word": ("libreoffice_writer",), "document": ("libreoffice_writer",), "impress": ("libreoffice_impress",),
    "powerpoint": ("libreoffice_impress",), "presentation": ("libreoffice_impress",),
    "slides": ("libreoffice_impress",), "libreoffice": LIBREOFFICE,
    "code": ("vscode",), "vs_code": ("vscode",), "visual_studio_code": ("vscode",),
    "google_chrome": ("chrome",), "browser": ("chrome", "chromium", "firefox"),
    "pdf": PDF, "evince": ("evince",), "okular": ("okular",), "pdf_viewer": PDF,
    "text_editor": ("gedit", "vscode"), "image_viewer": ("gimp",),
    "gnome_terminal": ("gnome_terminal",), "terminal_emulator": TERMINAL, "nautilus": ("file_manager",),
    "file_manager": ("file_manager",), "files_app": ("file_manager",), "firefox_esr": ("firefox",),
    "web_browser": tuple(sorted(BROWSERS)),
    # Plain-machine tasks: the terminal/file system is enough.
    **{k: () for k in ("os", "linux", "ubuntu", "shell", "terminal", "bash", "cli", "file", "files",
                       "file_management", "filesystem", "system", "python", "multi_apps", "other",
                       "general", "command_line", "desktop")},
})

# `open` step: file suffix -> alternatives.
OPEN_SUFFIX: dict[str, tuple[str, ...]] = {}
for _sfx, _apps in (
    ((".xlsx", ".xls", ".ods", ".csv", ".xlsm"), ("libreoffice_calc",)),
    ((".docx", ".doc", ".odt", ".rtf"), ("libreoffice_writer",)),
    ((".pptx", ".ppt", ".odp"), ("libreoffice_impress",)),
    ((".pdf",), PDF),
    ((".xcf", ".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp"), ("gimp",)),
    ((".mp4", ".mkv", ".avi", ".mov", ".webm", ".mp3", ".wav", ".ogg", ".flac"), ("vlc",)),
    ((".svg",), ("inkscape",)),
    ((".blend",), ("blender",)),
    ((".osp",), ("openshot",)),
    ((".html", ".htm"), ("chrome", "chromium", "firefox")),
    ((".txt", ".md", ".py", ".json", ".js", ".ts", ".c", ".cpp", ".java", ".sh", ".yaml", ".yml"),
     ("gedit", "vscode")),
):
    for _s in _sfx:
        OPEN_SUFFIX[_s] = _apps

# Launched/called program basename -> app. These become app requirements (not executables).
GUI_PROGRAMS: dict[str, tuple[str, ...]] = {
    "soffice": LIBREOFFICE, "libreoffice": LIBREOFFICE, "localc": ("libreoffice_calc",),
    "lowriter": ("libreoffice_writer",), "loimpress": ("libreoffice_impress",),
    "gimp": ("gimp",), "vlc": ("vlc",), "cvlc": ("vlc",), "code": ("vscode",),
    "google-chrome": ("chrome",), "google-chrome-stable": ("chrome",), "chromium": ("chromium",),
    "chromium-browser": ("chromium",), "firefox": ("firefox",), "blender": ("blender",),
    "openshot": ("openshot",), "openshot-qt": ("openshot",), "thunderbird": ("thunderbird",),
    "zenity": ("zenity",), "xterm": ("xterm",), "gedit": ("gedit",), "evince": ("evince",),
    "okular": ("okular",), "inkscape": ("inkscape",), "firefox-esr": ("firefox",),
    "gnome-terminal": ("gnome_terminal",), "xfce4-terminal": ("xfce4_terminal",), "nautilus": ("file_manager",), "thunar": ("file_manager",),
    "pcmanfm": ("file_manager",), "nemo": ("file_manager",), "x-terminal-emulator": TERMINAL,
}
SOFFICE_FLAGS = {"--calc": "libreoffice_calc", "--writer": "libreoffice_writer", "--impress": "libreoffice_impress"}

# Import name -> distribution, for messages ("fitz (PyMuPDF)") and for `python -m pip install X` hints.
DISTRIBUTION: dict[str, str] = {
    "docx": "python-docx", "pptx": "python-pptx", "fitz": "PyMuPDF", "pymupdf": "PyMuPDF", "PIL": "Pillow",
    "cv2": "opencv-python", "skimage": "scikit-image", "odf": "odfpy", "sklearn": "scikit-learn",
    "yaml": "PyYAML", "bs4": "beautifulsoup4", "pdfminer": "pdfminer.six", "dateutil": "python-dateutil",
    "magic": "python-magic", "Xlib": "python-xlib", "gi": "PyGObject", "dbus": "dbus-python",
    "pyatspi": "pyatspi", "Levenshtein": "python-Levenshtein", "pypdf": "pypdf", "PyPDF2": "PyPDF2",
    "openpyxl": "openpyxl", "numpy": "numpy", "pandas": "pandas", "requests": "requests",
    "pyautogui": "PyAutoGUI", "torch": "torch", "pikepdf": "pikepdf", "xlrd": "xlrd", "lxml": "lxml",
    "fpdf": "fpdf2", "pyexcel_ods3": "pyexcel-ods3", "msoffcrypto": "msoffcrypto-tool", "pyhanko": "pyHanko",
    "Crypto": "pycryptodome", "websocket": "websocket-client", "stable_baselines3": "stable-baselines3",
    "playwright": "playwright", "toml": "toml",
}
# Modules that drive the GUI: importing one means the task needs a display.
DISPLAY_MODULES = frozenset({"pyautogui", "Xlib", "pyatspi", "pynput", "tkinter"})
DISPLAY_PROGRAMS = frozenset({"xdotool", "wmctrl", "xclip", "xsel", "xprop", "xwininfo", "scrot", "import",
                              "xrandr", "xset"})

# Stdlib: the host's list, adjusted for what the image's version removed or lacked.
_REMOVED = {
    (3, 12): ("distutils", "imp", "asynchat", "asyncore", "smtpd"),
    (3, 13): ("aifc", "audioop", "cgi", "cgitb", "chunk", "crypt", "imghdr", "mailcap", "msilib", "nis",
              "nntplib", "ossaudiodev", "pipes", "sndhdr", "spwd", "sunau", "telnetlib", "uu", "xdrlib",
              "lib2to3"),
}
_ADDED = {"tomllib": (3, 11), "zoneinfo": (3, 9), "graphlib": (3, 9)}
_HOST_STDLIB = frozenset(sys.stdlib_module_names) | {"__future__", "__main__"}
# Removed before the host's version (so absent from sys.stdlib_module_names) but present in older images.
_OLD_STDLIB = {m: v for v, mods in _REMOVED.items() for m in mods}


def stdlib_status(name: str, version: tuple[int, int]) -> str:
    """'stdlib', 'not_stdlib', or 'removed'/'too_new' when the image's Python decides it."""
    if name in _ADDED and version < _ADDED[name]:
        return "too_new"
    if name in _OLD_STDLIB:
        return "removed" if version >= _OLD_STDLIB[name] else "stdlib"
    return "stdlib" if name in _HOST_STDLIB else "not_stdlib"


# app_type values outside the vocabulary whose meaning is clear (real bundles use them):
# mock websites whose app is named by the task's hosts/placeholders, and "some GUI".
_MOCK_GENERIC = frozenset({"mock_websites", "mock_website", "mock_web", "mock", "mocks", "web", "website",
                           "websites", "web_app", "webapp"})
_GUI_GENERIC = frozenset({"gui", "desktop_gui", "gui_app", "desktop_app", "desktop_apps"})


@dataclass(frozen=True)
class AppTypeReading:
    apps: list[tuple[str, ...]]  # desktop app alternatives, one entry per part that names an app
    mocks: list[str]  # mock app names (`gmail_mock` -> gmail)
    generic_mock: bool  # a mock web task whose app the hosts/placeholders name
    gui: bool  # a GUI is needed but no particular app
    unknown: list[str]  # parts with no reading (a note)
    notes: list[str]  # variants read with a meaning (a `normalized` note)


def app_type_needs(app_type: str) -> AppTypeReading:
    """Split a (comma-joined) app_type and read each part."""
    r = AppTypeReading([], [], False, False, [], [])
    gui = generic = False
    for part in app_type.split(","):
        t = part.strip().lower().replace("-", "_").replace(" ", "_")
        if not t:
            continue
        if t.endswith("_mock"):
            r.mocks.append(t[: -len("_mock")])
        elif t in APP_TYPE:
            if APP_TYPE[t]:
                r.apps.append(APP_TYPE[t])
        elif t in _MOCK_GENERIC:
            generic = True
            r.notes.append(f"app_type {part.strip()!r} read as a mock web task (its hosts or placeholders name the app)")
        elif t in _GUI_GENERIC:
            gui = True
            r.notes.append(f"app_type {part.strip()!r} read as a desktop task needing a display (no particular app)")
        else:
            r.unknown.append(part.strip())
    return AppTypeReading(r.apps, r.mocks, generic, gui, r.unknown, r.notes)
