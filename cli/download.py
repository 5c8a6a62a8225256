"""`shinken download`: fetch the CUA-Gym export from the hub (or take a local archive),
verify it, and unpack it safely."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from shinken.cli.common import JsonFlag, Output

EXAMPLES = [
    "shinken download --local-dir data/cua-gym    # the release; tasks land in data/cua-gym/tasks",
    "shinken download --revision <commit sha> --json | jq .commit    # a pinned revision",
    "shinken download --archive tasks.tar.zst --dest data/tasks    # only extract a local archive",
]


def download(
    repo_id: Annotated[str, typer.Option("--repo-id", help="Dataset repo on the hub.")] = "xlangai/CUA-Gym",
    revision: Annotated[Optional[str], typer.Option("--revision", help="Branch, tag or commit (default: main).")] = None,
    local_dir: Annotated[
        Optional[Path], typer.Option("--local-dir", help="Where downloaded files go (default: $HF_HOME/shinken/...).")
    ] = None,
    dest: Annotated[
        Optional[Path], typer.Option("--dest", help="Folder to extract task bundles into (default: <local-dir>/tasks).")
    ] = None,
    archive: Annotated[
        Optional[Path], typer.Option("--archive", help="Extract this local .tar.zst instead of downloading.")
    ] = None,
    json_out: JsonFlag = False,
) -> None:
    """Download the CUA-Gym export from the hub, verify it, and extract the task bundles.

    Fetches artifacts/*, url_variables.json and data/tasks.parquet, verifies checksums, and
    extracts the bundles into DEST. With --archive FILE --dest DIR, only extracts a local
    .tar.zst. Honours HF_ENDPOINT, HF_TOKEN and HF_HOME; partial downloads resume.
    """
    output = Output(json_out)
    if archive is not None:
        from shinken.download.archive import extract_tar_zst
        from shinken.errors import ShinkenError
        from shinken.schemas import check_own

        if dest is None:
            raise ShinkenError("--archive needs --dest DIR (a new or empty folder to extract into)")
        stats = extract_tar_zst(archive, dest, progress=True)
        doc = {"archive": str(archive), "dest": str(stats.dest), "members": stats.members,
               "files": stats.files, "bytes": stats.bytes}
        check_own("extract_result", doc, "the extraction result")
        output.result(doc, lambda: output.line(f"extracted {stats.files} files ({stats.bytes} bytes) into {stats.dest}"))
        return

    from shinken.download.hub import download as fetch

    res = fetch(repo_id, revision=revision, local_dir=local_dir, dest=dest, progress=True)

    def render() -> None:
        for f in res.files:
            extra = f" (resumed at {f.resumed_from} bytes)" if f.status == "resumed" else ""
            output.line(f"{f.status:>10}  {f.path}  {f.size} bytes{extra}")
        if res.extracted == "extracted":
            output.line(f"extracted {res.members} members: {res.tasks} tasks in {res.dest}")
        elif res.extracted == "skipped":
            output.line(f"already extracted and verified: {res.tasks} tasks in {res.dest}")
        output.line(f"{res.repo_id}@{res.commit} -> {res.local_dir}")

    output.result(res.to_json(), render)
