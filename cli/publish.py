"""`shinken publish`: the curated dataset on the Hugging Face hub (or in a folder for review),
with a dataset card that says where every task came from and why it is in or out."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from shinken.cli.common import JsonFlag, Output

EXAMPLES = [
    "shinken publish --repo-id me/cua-clean --receipt out/receipt.json --triage out/triage.json"
    "    # a private dataset repo, one commit",
    "shinken publish --repo-id me/cua-clean --receipt out/receipt.json --local-dir out/publish"
    "    # the exact files, for review, no hub",
    "shinken publish --repo-id team/cua-clean --receipt out/receipt.json --create-pr -m 'probe with 4 forks'"
    "    # a pull request instead of a commit",
]


def publish(
    repo_id: Annotated[str, typer.Option("--repo-id", help="Dataset repo to publish to (ORG/NAME).")],
    receipt: Annotated[Path, typer.Option("--receipt", help="Probe receipt (`shinken probe --receipt`).")],
    triage: Annotated[
        Optional[Path], typer.Option("--triage", help="Triage report (`shinken triage --report`): verdicts and reason codes.")
    ] = None,
    profile: Annotated[
        Optional[Path], typer.Option("--profile", help="Profile (`shinken profile --out DIR`: DIR or its profile.json): band and control splits.")
    ] = None,
    task_root: Annotated[
        Optional[Path], typer.Option("--task-root", help="Folder of task bundles (default: the one the receipt names).")
    ] = None,
    revision: Annotated[str, typer.Option("--revision", help="Branch to commit to (created when missing).")] = "main",
    private: Annotated[
        Optional[bool], typer.Option("--private/--public", help="Visibility of a repo publish creates (default private).")
    ] = None,
    create_pr: Annotated[bool, typer.Option("--create-pr", help="Open a pull request instead of committing.")] = False,
    overwrite_foreign: Annotated[bool, typer.Option(
        "--overwrite-foreign-repo",
        help="Publish into an existing repo whose card is not a shinken dataset's: its data/ and artifacts/ files, "
             "README.md and provenance.json are replaced or deleted (refused without this).")] = False,
    local_dir: Annotated[
        Optional[Path], typer.Option("--local-dir", help="Write the files here for review instead of uploading.")
    ] = None,
    message: Annotated[Optional[str], typer.Option("--message", "-m", help="Commit message.")] = None,
    license: Annotated[
        Optional[str], typer.Option("--license", help="License id for the card (default: the source dataset's).")
    ] = None,
    val_fraction: Annotated[float, typer.Option("--val-fraction", help="As make-workspace: share of tasks for validation.")] = 0.1,
    seed: Annotated[int, typer.Option("--seed", help="As make-workspace: split seed.")] = 0,
    stratify: Annotated[str, typer.Option("--stratify", help="As make-workspace: task field to stratify by, or `none`.")] = "app_type",
    name: Annotated[str, typer.Option("--name", help="As make-workspace: the environment the rows are for.")] = "shinken_cua",
    json_out: JsonFlag = False,
) -> None:
    """Publish the kept tasks of a probe receipt as a Hugging Face dataset repo.

    The repo gets train/validation rows exactly as make-workspace splits them, a `dropped`
    split with the reason for every task left out, the kept bundles as one .tar.zst that
    `shinken download --repo-id` turns back into a task root, and a dataset card with the
    provenance (source revision and archive hash, image, probe settings, counts). Everything
    goes up in one commit against the head read at the start, so a concurrent change fails
    clearly; new repos are private; unchanged content makes no commit. Honours HF_ENDPOINT
    and HF_TOKEN.
    """
    from shinken.publish.contents import SplitOptions
    from shinken.publish.run import PublishOptions, publish as run_publish

    output = Output(json_out)
    res = run_publish(PublishOptions(
        repo_id=repo_id, receipt=receipt, triage=triage, profile=profile, task_root=task_root, revision=revision,
        private=private, create_pr=create_pr, local_dir=local_dir, message=message, license=license, name=name,
        overwrite_foreign=overwrite_foreign,
        split=SplitOptions(val_fraction=val_fraction, seed=seed, stratify=stratify)),
        say=lambda line: output.note(f"shinken: {line}"))

    def render() -> None:
        from rich.table import Table

        table = Table(title=f"shinken publish: {res.status}")
        table.add_column("file")
        table.add_column("bytes", justify="right")
        table.add_column("change")
        for f in res.files:
            table.add_row(f["path"], f"{f['size']:,}", f["change"])
        output.table(table)
        output.line("  ".join(f"{s}: {n}" for s, n in res.splits.items()))
        for note in res.notes:
            output.line(f"note: {note}")
        if res.status == "written":
            output.line(f"wrote {len(res.files)} files to {res.local_dir} (nothing was sent to the hub)")
        elif res.status == "unchanged":
            output.line(f"{res.repo_id}@{res.revision} is already at {res.commit}: unchanged, no commit")
        elif res.status == "pull_request":
            output.line(f"opened {res.pr_url} (commit {res.commit}, parent {res.parent})")
        else:
            output.line(f"{res.repo_id}@{res.revision}: committed {res.commit} (parent {res.parent})")

    output.result(res.to_json(), render)
