"""`shinken download`: fetch the CUA-Gym export from the hub (or take a local archive),
verify it, and unpack it safely."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from shinken.cli import common
from shinken.cli.common import JsonFlag


def register(app: typer.Typer) -> None:
    @app.command(
        "download",
        help=(
            "Download the CUA-Gym export (artifacts/*, url_variables.json, data/tasks.parquet) from the hub, "
            "verify checksums, and extract the task bundles into DEST. With --archive FILE --dest DIR, only "
            "extract a local .tar.zst. Honours HF_ENDPOINT, HF_TOKEN and HF_HOME; partial downloads resume."
        ),
    )
    def _cmd(
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
        json: JsonFlag = False,
    ) -> None:
        if archive is not None:
            from shinken.download.archive import extract_tar_zst
            from shinken.errors import ShinkenError

            if dest is None:
                raise ShinkenError("--archive needs --dest DIR (a new or empty folder to extract into)")
            stats = extract_tar_zst(archive, dest, progress=True)
            doc = {"archive": str(archive), "dest": str(stats.dest), "members": stats.members,
                   "files": stats.files, "bytes": stats.bytes}
            if json:
                from shinken.schemas import validation_error

                assert validation_error("extract_result", doc) is None
                common.print_json(doc)
            else:
                common.out.print(f"extracted {stats.files} files ({stats.bytes} bytes) into {stats.dest}")
            return

        from shinken.download.hub import download

        res = download(repo_id, revision=revision, local_dir=local_dir, dest=dest, progress=True)
        if json:
            common.print_json(res.to_json())
            return
        for f in res.files:
            extra = f" (resumed at {f.resumed_from} bytes)" if f.status == "resumed" else ""
            common.out.print(f"{f.status:>10}  {f.path}  {f.size} bytes{extra}")
        if res.extracted == "extracted":
            common.out.print(f"extracted {res.members} members: {res.tasks} tasks in {res.dest}")
        elif res.extracted == "skipped":
            common.out.print(f"already extracted and verified: {res.tasks} tasks in {res.dest}")
        common.out.print(f"{res.repo_id}@{res.commit} -> {res.local_dir}")
