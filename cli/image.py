"""`shinken image build|inspect|push|pull`: the sandbox images, their capability manifests, and moving
them between Docker engines through a registry (every fleet host runs the same image id)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.status import Status
from rich.table import Table

from shinken.cli.common import JsonFlag, Output, add_command, group

app = group("Build and inspect task images.")

BUILD_EXAMPLES = [
    "shinken image build    # both images; cached by content hash, so a second run takes a second",
    "shinken image build cua --ca-bundle /etc/ssl/certs/ca-certificates.crt --json",
    "shinken image build cua --extra vscode.Dockerfile    # a fragment on top of cua; pass the printed tag to --image",
]
INSPECT_EXAMPLES = [
    "shinken image inspect shinken/sandbox-cua:latest",
    "shinken image inspect shinken/sandbox-cua:latest --json > manifest.json    # for triage --manifest",
]

CaBundleOpt = Annotated[
    Optional[Path],
    typer.Option("--ca-bundle", exists=True, dir_okay=False, help="PEM CA bundle pip trusts during the build (for an intercepting proxy). "
                 "Default: /etc/ssl/certs/ca-certificates.crt when it exists.", envvar="SHINKEN_CA_BUNDLE"),
]


class _StatusProgress:
    """Build output to stderr: step lines and errors printed, everything else in a live status line."""

    def __init__(self, output: Output, status: Status | None, verbose: bool) -> None:
        self.output = output
        self.status = status
        self.verbose = verbose

    def __call__(self, line: str) -> None:
        line = line.rstrip()
        if self.verbose or line.startswith(("Step ", "building ", "adopting ", "debootstrap", "docker import")):
            self.output.note(line)
        if self.status is not None:
            self.status.update(f"[dim]{line[:150]}[/]")


@contextmanager
def build_progress(output: Output, label: str, verbose: bool) -> Iterator[_StatusProgress]:
    """The progress callable for a build: a live status line on a terminal; in logs (CI)
    none, since rich would hold the prints back until the end."""
    if output.live:
        with Status(label, console=output.err) as status:
            yield _StatusProgress(output, status, verbose)
    else:
        yield _StatusProgress(output, None, verbose)


def build(
    name: Annotated[Optional[str], typer.Argument(
        help="linux, cua or all (default all). With --extra: the base, linux, cua (default) or an existing image.")] = None,
    extra: Annotated[Optional[Path], typer.Option(
        "--extra", help="Dockerfile fragment (RUN/ENV/COPY lines, no FROM) to build on top of the image; "
        "prints the tag to pass to --image.")] = None,
    tag: Annotated[Optional[str], typer.Option(
        "--tag", help="Repository for the --extra image (default shinken/sandbox-<base>-<fragment name>); "
        "shinken adds :<content hash> and :latest.")] = None,
    ca_bundle: CaBundleOpt = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Print every build output line.")] = False,
    json_out: JsonFlag = False,
) -> None:
    """Build (or find cached) sandbox images; prints image ids."""
    from shinken.errors import ShinkenError
    from shinken.images.build import IMAGE_NAMES, build_image
    from shinken.images.extra import build_extra

    output = Output(json_out)

    if extra is not None:
        if name == "all":
            raise ShinkenError("--extra builds on one base; name it: `shinken image build cua --extra FILE`")
        base = name or "cua"
        jobs = [(base, lambda progress: build_extra(extra, base, repo=tag, ca_bundle=ca_bundle, progress=progress))]
    else:
        if tag is not None:
            raise ShinkenError("--tag names an --extra image; pass --extra FILE too (sandbox images are tagged by shinken)")
        names = list(IMAGE_NAMES) if name in (None, "all") else [name]
        if any(n not in IMAGE_NAMES for n in names):
            raise ShinkenError(f"unknown image {name!r}; choose linux, cua or all")
        jobs = [(n, lambda progress, n=n: build_image(n, ca_bundle=ca_bundle, progress=progress)) for n in names]
    results = []
    for n, job in jobs:
        with build_progress(output, f"image {n}", verbose) as progress:
            outcome = job(progress)
        output.note(f"{outcome.tag}: {'cached' if outcome.cached else 'built'} in {outcome.seconds:.1f}s")
        results.append({"name": outcome.name, "tag": outcome.tag, "latest": outcome.tag.split(":")[0] + ":latest",
                        "id": outcome.image_id, "content_hash": outcome.content_hash,
                        "cached": outcome.cached, "seconds": round(outcome.seconds, 2)})
    table = Table("image", "tag", "id", "cached", "seconds")
    for r in results:
        table.add_row(r["name"], r["tag"], r["id"][7:19], "yes" if r["cached"] else "no", f"{r['seconds']:.1f}")
    output.result(results, lambda: output.table(table))


def inspect(
    image: Annotated[str, typer.Argument(help="Image tag or id, e.g. shinken/sandbox-linux:latest.")],
    json_out: JsonFlag = False,
    refresh: Annotated[bool, typer.Option("--refresh", help="Ignore the cached manifest.")] = False,
) -> None:
    """Print an image's capability manifest (python modules, executables, desktop apps, ...)."""
    from shinken.images.capabilities import get_manifest

    output = Output(json_out)
    started = time.monotonic()
    manifest = get_manifest(image, refresh=refresh)
    if not json_out:
        output.note(f"manifest in {time.monotonic() - started:.2f}s")
    output.result(manifest, lambda: output.table(_manifest_table(manifest)))


def _manifest_table(manifest: dict[str, Any]) -> Table:
    table = Table("field", "value", show_header=False)
    table.add_row("image", f"{manifest['image']['ref']} ({manifest['image']['id'][7:19]})")
    py = manifest["python"]
    table.add_row("python", f"{py['executable']} {py['version']}")
    table.add_row("display", "yes" if manifest["display"] else "no")
    table.add_row("accessibility", "yes" if manifest["accessibility"] else "no")
    table.add_row("desktop apps", ", ".join(manifest["desktop_apps"]) or "-")
    table.add_row("python modules", f"{len(manifest['python_modules'])}: " + _sample(manifest["python_modules"], _PY_HIGHLIGHT))
    table.add_row("executables", f"{len(manifest['executables'])}: " + _sample(manifest["executables"], _EXE_HIGHLIGHT))
    table.add_row("dpkg packages", str(len(manifest["dpkg_packages"])))
    if "extra" in manifest:
        ex = manifest["extra"]
        added = ex["added"]
        table.add_row("extra", f"{ex['fragment']['name']} (sha256 {ex['fragment']['sha256'][:12]}) on {ex['base'][7:19]}")
        table.add_row("  added", "; ".join(f"{k.replace('_', ' ')}: {' '.join(sorted(v)) or '-'}"
                                           for k, v in added.items() if k != "dpkg_packages")
                      + f"; {len(added['dpkg_packages'])} dpkg packages")
    table.add_row("generated", manifest["generated_at"])
    return table


# The names task authors ask about first; the full lists are in --json.
_PY_HIGHLIGHT = ("openpyxl", "docx", "pptx", "fitz", "pypdf", "PyPDF2", "pikepdf", "pdfminer", "odf", "PIL",
                 "numpy", "pandas", "cv2", "skimage", "scipy", "matplotlib", "requests", "pyautogui", "playwright",
                 "lxml", "torch")
_EXE_HIGHLIGHT = ("python3", "Xvfb", "xdotool", "zenity", "xterm", "soffice", "libreoffice", "gimp", "vlc",
                  "code", "google-chrome", "firefox", "thunderbird", "gnome-terminal", "nautilus", "inkscape",
                  "evince", "xcf2png", "ffmpeg", "convert", "tesseract", "pdftk", "socat")


PUSH_EXAMPLES = ["shinken image push shinken/sandbox-cua:latest --registry 10.0.0.1:5000    # on the fleet's head"]
PULL_EXAMPLES = ["shinken image pull shinken/sandbox-cua:latest --registry 10.0.0.1:5000    # on a new host; the id is checked"]
RegistryOpt = Annotated[str, typer.Option("--registry", help="Registry HOST:PORT (e.g. Debian's docker-registry on the head).",
                                          envvar="SHINKEN_REGISTRY")]


def _move(direction: str, image: str, registry: str, json_out: bool) -> None:
    from shinken.fleet import registry as reg
    from shinken.sandbox.docker_client import connect

    output = Output(json_out)
    reg.check_registry(registry)
    reg.split_ref(image)
    client = connect()
    moved = (reg.push if direction == "push" else reg.pull)(client, image, registry)
    doc = {"image": moved.ref, "remote": moved.remote, "id": moved.image_id, "seconds": round(moved.seconds, 2)}
    verb = "pushed to" if direction == "push" else "pulled from"
    output.result(doc, lambda: output.line(f"{moved.ref} ({moved.image_id[7:19]}) {verb} {moved.remote} in {moved.seconds:.1f}s"))


def push(
    image: Annotated[str, typer.Argument(help="Local image name, repository:tag.")],
    registry: RegistryOpt,
    json_out: JsonFlag = False,
) -> None:
    """Push a task image to the fleet's registry (its id is checked against what the registry then holds)."""
    _move("push", image, registry, json_out)


def pull(
    image: Annotated[str, typer.Argument(help="Image name, repository:tag, as the fleet runs it.")],
    registry: RegistryOpt,
    json_out: JsonFlag = False,
) -> None:
    """Pull a task image from the fleet's registry under its own name; the id must be the registry's."""
    _move("pull", image, registry, json_out)


AUDIT_EXAMPLES = [
    "shinken image audit shinken/sandbox-cua:latest    # the shipped image: every attack held",
    "shinken image audit my/tasks:v2 --json > audit.json    # your own image (e.g. built with image build --extra)",
    "shinken image audit my/tasks:v2 --attack writable-path-folder --attack tmp-module-shadow --no-solved",
]


def audit(
    image: Annotated[str, typer.Argument(help="Task image to attack (tag or id).")],
    attack: Annotated[Optional[list[str]], typer.Option(
        "--attack", help="Only this attack (repeatable); default: the whole battery.")] = None,
    solved: Annotated[bool, typer.Option(
        "--solved/--no-solved", help="Also run each attack beside a solution (it must still score 1.0).")] = True,
    concurrency: Annotated[int, typer.Option("--concurrency", "-c", min=1, help="Attacks run at once.")] = 2,
    json_out: JsonFlag = False,
) -> None:
    """Attack the reward of a canary task on IMAGE as a policy would (the red-team battery) and print,
    per attack, whether the reward held or was forged. Exit 1 when an unsolved run read 1.0 or a
    solved one did not."""
    from shinken.errors import ShinkenError, WorkFailed
    from shinken.integrity.audit import BROKEN, FORGED, Outcome, run_battery
    from shinken.integrity.battery import by_name
    from shinken.sandbox.docker_client import connect, resolve_image
    from shinken.schemas import check_own

    try:
        attacks = by_name(attack)
    except KeyError as exc:
        from shinken.integrity.battery import ATTACKS

        raise ShinkenError(f"--attack: no attack named {exc.args[0]}; the battery has: "
                           f"{', '.join(a.name for a in ATTACKS)}") from None
    output = Output(json_out)
    image_id = resolve_image(connect(), image)
    started = time.monotonic()
    total = len(attacks) * (2 if solved else 1)
    done: list[Outcome] = []
    with output.progress(f"auditing {image}") as tick:
        def seen(o: Outcome) -> None:
            done.append(o)
            tick(len(done), total)

        outcomes = run_battery(image_id, attacks, parallel=concurrency, solved=solved, on_outcome=seen)
    forged = sum(o.verdict == FORGED for o in outcomes)
    broken = sum(o.verdict == BROKEN for o in outcomes)
    doc = {"schema": "shinken.image_audit/1", "image": {"ref": image, "id": image_id},
           "outcomes": [o.to_json() for o in outcomes], "forged": forged, "broken": broken,
           "seconds": round(time.monotonic() - started, 1)}

    def render() -> None:
        table = Table("attack", "kind", "unsolved", "why", "solved", "why", title=f"{image} ({image_id[7:19]})")
        by: dict[str, dict[bool, Outcome]] = {}
        for o in outcomes:
            by.setdefault(o.attack, {})[o.solved] = o
        for name, runs in by.items():
            u, s = runs.get(False), runs.get(True)
            table.add_row(name, (u or s).kind if (u or s) else "", _mark(u), u.why if u else "",
                          _mark(s), s.why if s else "")
        output.table(table)
        output.line(f"{forged} forged, {broken} broken of {len(outcomes)} runs in {doc['seconds']}s")

    check_own("image_audit", doc, "`shinken image audit` output")
    output.result(doc, render)
    if forged or broken:
        raise WorkFailed(f"{image}: {forged} attack(s) forged a reward, {broken} solved run(s) did not score 1.0")


def _mark(o: Any) -> str:
    if o is None:
        return "-"
    return {"held": "[green]held[/]", "scored": "[green]1.0[/]", "forged": "[red bold]FORGED[/]",
            "broken": "[red bold]broken[/]"}[o.verdict]


add_command(app, "build", build, BUILD_EXAMPLES)
add_command(app, "audit", audit, AUDIT_EXAMPLES)
add_command(app, "inspect", inspect, INSPECT_EXAMPLES)
add_command(app, "push", push, PUSH_EXAMPLES)
add_command(app, "pull", pull, PULL_EXAMPLES)


def _sample(have: list[str], wanted: tuple[str, ...]) -> str:
    present = set(have)
    got = [w for w in wanted if w in present]
    missing = [w for w in wanted if w not in present]
    return " ".join(got) + (f"  [dim](not: {' '.join(missing)})[/]" if missing else "")
