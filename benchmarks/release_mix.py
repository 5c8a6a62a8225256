"""What the synthetic release's scripts use, app by app: the reward's imports and the
programs it calls, and what the setup starts. The mix follows what is known of the real
release (a published AST scan of all 10,910 rewards lists the modules
below; 9 GIMP rewards call xcf2png, 2 want torch; desktop setups start their app through a
`launch_gui` helper; web tasks POST their state to a `__CUA_GYM_<APP>_URL__` mock and open
it in Chrome). The published scan gives no counts, so the weights and probabilities here
are estimates, written down so a share measured on this corpus says what it assumes.

App: its weight in the mix, setup kinds with weights, the command its setup starts it with,
what its reward uses. Use: a probability, the import lines and the lines of check() it adds."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Use:
    p: float
    imports: tuple[str, ...] = ()
    lines: tuple[str, ...] = ()  # body lines of check(), 4-space indented by the template


@dataclass(frozen=True)
class App:
    name: str  # the task's app_type
    weight: float
    kinds: tuple[tuple[str, float], ...]  # setup file kind -> weight
    launch: str | None = None  # a shell command the setup starts the app with ({doc} = the document)
    uses: tuple[Use, ...] = field(default_factory=tuple)
    mock: str | None = None  # mock web app (placeholders __CUA_GYM_<MOCK>_URL__)


def _sub(program: str, *args: str) -> Use:
    argv = ", ".join(repr(a) for a in (program, *args))
    return Use(0.0, ("import subprocess",), (f"subprocess.run([{argv}], capture_output=True)",))


def _prog(p: float, program: str, *args: str) -> Use:
    u = _sub(program, *args)
    return Use(p, u.imports, u.lines)


JUDGE_TEXT = Use(0.0, ("import sys",), (
    "sys.path.insert(0, '/tmp')",
    "try:",
    "    from reward_judge import call_llm_judge",
    "    score += 0.3 * call_llm_judge('do the task', 'the result is right', open(TARGET).read()[:2000])",
    "except Exception as exc:",
    "    print('judge unavailable:', exc)",
))
JUDGE_VISION = Use(0.0, ("import sys",), (
    "sys.path.insert(0, '/tmp')",
    "from reward_judge import call_vision_judge",
    "score += 0.4 * call_vision_judge('edit the image', '/home/user/before.png', '/home/user/after.png')",
))


def _judge(p: float, use: Use = JUDGE_TEXT) -> Use:
    return Use(p, use.imports, use.lines)


def _mod(p: float, module: str, line: str | None = None) -> Use:
    top = module.split()[1] if module.startswith(("import ", "from ")) else module
    stmt = module if module.startswith(("import ", "from ")) else f"import {module}"
    return Use(p, (stmt,), ((line,) if line else (f"_ = {top.split('.')[0]}",)))


PAUSE = ("python3", "-c", "import pyautogui; pyautogui.hotkey('ctrl', 's')")

APPS: tuple[App, ...] = (
    App("libreoffice_calc", 1500, (("xlsx", 0.6), ("py", 0.4)), 'libreoffice --calc "{doc}"', (
        _mod(0.9, "openpyxl"), _mod(0.2, "pandas"), _mod(0.05, "from odf.opendocument import load", "_ = load"),
        _mod(0.02, "ezodf"), _mod(0.01, "pyexcel_ods3"), _mod(0.01, "msoffcrypto"), _mod(0.01, "dbf"),
        _mod(0.02, "matplotlib"), _judge(0.02))),
    App("libreoffice_writer", 1100, (("docx", 0.6), ("py", 0.4)), 'libreoffice --writer "{doc}"', (
        _mod(0.9, "docx"), _mod(0.05, "from odf import text", "_ = text"), _mod(0.05, "fitz"),
        _mod(0.03, "reportlab"), _judge(0.04))),
    App("libreoffice_impress", 900, (("pptx", 0.6), ("py", 0.4)), 'libreoffice --impress "{doc}"', (
        _mod(0.9, "pptx"), _mod(0.1, "from PIL import Image", "_ = Image"), _judge(0.03))),
    App("vscode", 800, (("py", 1.0),), 'code "{doc}"', (
        _prog(0.1, "python3", "-m", "pytest", "-q", "/home/user/project"), _mod(0.03, "toml"),
        _mod(0.02, "pytest"), _judge(0.03))),
    App("gimp", 700, (("py", 1.0),), 'gimp "{doc}"', (
        _mod(0.8, "from PIL import Image", "_ = Image"), _mod(0.7, "numpy"), _mod(0.1, "skimage"),
        _mod(0.1, "cv2"), _mod(0.05, "piexif"), _mod(0.03, "gimpformats"), _mod(0.02, "scipy"),
        _prog(0.013, "xcf2png", "/home/user/image.xcf", "-o", "/tmp/flat.png"),
        _prog(0.1, "convert", "/home/user/out.png", "-resize", "50%", "/tmp/small.png"),
        _judge(0.05, JUDGE_VISION))),
    App("vlc", 400, (("sh", 1.0),), "vlc {doc}", (
        _mod(0.2, "mutagen"), _prog(0.3, "ffprobe", "-v", "error", "-show_format", "/home/user/clip.mp4"),
        _mod(0.05, "cv2"))),
    App("os", 1300, (("sh", 0.6), ("py", 0.4)), None, (
        _mod(0.05, "pandas"), _mod(0.02, "Crypto"), _mod(0.01, "yaml"), _mod(0.005, "gymnasium"),
        _mod(0.005, "fastapi"), _mod(0.01, "seaborn"), _mod(0.0004, "torch"), _mod(0.0003, "stable_baselines3"),
        _prog(0.02, "tesseract", "/home/user/scan.png", "stdout"))),
    App("terminal", 250, (("sh", 1.0),), "gnome-terminal --working-directory=/home/user", ()),
    App("file_management", 200, (("sh", 1.0),), "nautilus /home/user", ()),
    App("pdf", 600, (("py", 1.0),), 'evince "{doc}"', (
        _mod(0.5, "fitz"), _mod(0.2, "pypdf"), _mod(0.15, "PyPDF2"), _mod(0.1, "pikepdf"),
        _mod(0.1, "from pdfminer.high_level import extract_text", "_ = extract_text"), _mod(0.05, "fpdf"),
        _mod(0.02, "pyhanko"), _prog(0.05, "pdftk", "/home/user/a.pdf", "dump_data"))),
    App("chrome", 700, (("py", 1.0),), 'google-chrome --remote-debugging-port=9222 "file://{doc}"', (
        _mod(0.4, "websocket"), _mod(0.3, "from playwright.sync_api import sync_playwright", "_ = sync_playwright"),
        _mod(0.3, "requests"), _prog(0.1, "socat", "-V"))),
    App("thunderbird", 200, (("py", 1.0),), "thunderbird", (_mod(0.3, "mailbox"),)),
    App("inkscape", 100, (("py", 1.0),), 'inkscape "{doc}"', (_mod(0.5, "lxml"),)),
    App("multi_apps", 500, (("py", 1.0),), 'libreoffice --calc "{doc}"', (
        _mod(0.6, "openpyxl"), _mod(0.3, "docx"), _mod(0.2, "requests"), _judge(0.03))),
    App("libreoffice_calc,chrome", 200, (("py", 1.0),), 'google-chrome "file://{doc}"', (_mod(0.9, "openpyxl"),)),
    App("gmail_mock", 400, (("py", 1.0),), None, (_judge(0.15),), mock="GMAIL"),
    App("slack_mock", 300, (("py", 1.0),), None, (_judge(0.15),), mock="SLACK"),
    App("notion_mock", 300, (("py", 1.0),), None, (_judge(0.15),), mock="NOTION"),
    App("jira_mock", 250, (("py", 1.0),), None, (_judge(0.1),), mock="JIRA"),
    App("hubspot_mock", 255, (("py", 1.0),), None, (_judge(0.1),), mock="HUBSPOT"),
)
