"""`shinken image build --extra FILE`: a Dockerfile fragment built on top of a task image, cached by the
content hash of fragment + base, tagged for `--image`, with a capability manifest saying what it added.
The fragment installs GNU hello, a small Debian package the task images lack."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli_runner import run_cli

from shinken.errors import ShinkenError
from shinken.images.build import LABEL_HASH, LABEL_IMAGE, LABEL_PARENT
from shinken.images.capabilities import get_manifest
from shinken.images.extra import build_extra, extra_hash, read_fragment
from shinken.sandbox.docker_client import run_container
from shinken.sandbox.ownership import labels_for
from shinken.schemas import check_with_jsonschema

pytestmark = [pytest.mark.docker]

TEST_REPO = "shinken-test/sandbox-linux-hello"  # its own repository: never the tags users pass to --image
FRAGMENT = """\
# GNU hello: a small Debian package neither task image has
RUN apt-get update \\
 && apt-get install -y --no-install-recommends hello \\
 && rm -rf /var/lib/apt/lists/*
USER user
ENV SHINKEN_EXTRA_TEST=1
"""


@pytest.fixture(scope="module")
def fragment(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("extra") / "hello.Dockerfile"
    path.write_text(FRAGMENT)
    return path


@pytest.fixture(scope="module")
def hello_image(docker_client, linux_image, fragment):
    # on sandbox-linux (the smaller base): the mechanism is the same for cua, the default base
    return build_extra(fragment, "linux", repo=TEST_REPO, client=docker_client)


def test_extra_builds_on_the_base_and_is_tagged_by_content_hash(docker_client, linux_image, hello_image, fragment):
    base_id = docker_client.images.get(linux_image).id
    assert hello_image.content_hash == extra_hash(read_fragment(fragment), base_id)
    assert hello_image.tag == f"{TEST_REPO}:{hello_image.content_hash}"
    image = docker_client.images.get(hello_image.tag)
    assert f"{TEST_REPO}:latest" in image.tags
    assert image.labels[LABEL_IMAGE] == "extra" and image.labels[LABEL_PARENT] == base_id
    assert image.labels[LABEL_HASH] == hello_image.content_hash
    # the sandbox contract survives a fragment that switched USER
    assert image.attrs["Config"]["User"] in ("", "root") and image.attrs["Config"]["Cmd"] == ["sleep", "infinity"]
    box = run_container(docker_client, hello_image.tag, detach=True, init=True, network_mode="none",
                                       labels=labels_for("build", task="test-image-extra"), cap_drop=["ALL"])
    try:
        rc, out = box.exec_run(["hello"], user="user")
        assert rc == 0 and out.decode().strip() == "Hello, world!"
        rc, out = box.exec_run(["sh", "-c", "echo $SHINKEN_EXTRA_TEST; command -v shinken-desktop-up"], user="user")
        assert out.decode().split() == ["1", "/usr/local/bin/shinken-desktop-up"]
    finally:
        box.remove(force=True)


def test_second_extra_build_is_a_cache_hit(docker_client, hello_image, fragment):
    again = build_extra(fragment, "linux", repo=TEST_REPO, client=docker_client)
    assert again.cached and again.image_id == hello_image.image_id  # a cache hit: nothing built, the same image


def test_extra_hash_follows_fragment_and_base(fragment, tmp_path):
    f = read_fragment(fragment)
    other = tmp_path / "hello.Dockerfile"
    other.write_text(FRAGMENT + "RUN true\n")
    assert extra_hash(f, "sha256:" + "a" * 64) != extra_hash(f, "sha256:" + "b" * 64)
    assert extra_hash(f, "sha256:x") != extra_hash(read_fragment(other), "sha256:x")
    assert extra_hash(f, "sha256:x") == extra_hash(read_fragment(fragment), "sha256:x")
    assert f.name == "hello"


def test_extra_manifest_reports_what_the_fragment_added(docker_client, hello_image, linux_image):
    manifest = get_manifest(hello_image.tag, client=docker_client, refresh=True)
    assert check_with_jsonschema("capabilities", manifest) == []
    extra = manifest["extra"]
    assert extra["fragment"]["name"] == "hello" and len(extra["fragment"]["sha256"]) == 64
    assert extra["base"] == docker_client.images.get(linux_image).id
    assert extra["added"]["executables"] == ["hello"]
    assert "hello" in extra["added"]["dpkg_packages"]
    assert extra["added"]["python_modules"] == [] and extra["added"]["desktop_apps"] == []
    assert "hello" in manifest["executables"]  # and triage sees it like any executable
    base = get_manifest(linux_image, client=docker_client)
    assert "extra" not in base and "hello" not in base["executables"]


def test_extra_cli_prints_the_tag_to_pass_to_image(hello_image, fragment):
    proc = run_cli("image", "build", "linux", "--extra", fragment, "--tag", TEST_REPO, "--json", subprocess_=True,
                   timeout=600)
    assert proc.returncode == 0, proc.stderr
    (row,) = json.loads(proc.stdout)
    assert row["tag"] == hello_image.tag and row["cached"] is True and row["name"] == "hello"
    assert row["latest"] == f"{TEST_REPO}:latest"
    proc = run_cli("image", "inspect", hello_image.tag, subprocess_=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "extra" in proc.stdout and "hello" in proc.stdout


@pytest.mark.parametrize("args, text, message", [
    (["--extra", "/nonexistent/vscode.Dockerfile"], None, "no such file"),
    (["--extra", "{f}"], "FROM debian:12\nRUN true\n", "FROM is not allowed"),
    (["--extra", "{f}"], "# only a comment\n\n", "no Dockerfile instructions"),
    (["all", "--extra", "{f}"], "RUN true\n", "--extra builds on one base"),
    (["cua", "--tag", "me/x"], None, "--tag names an --extra image"),
    (["linux", "--extra", "{f}", "--tag", "Bad Name"], "RUN true\n", "not a Docker repository name"),
    (["no/such-base:nope", "--extra", "{f}"], "RUN true\n", "not found"),
])
def test_extra_cli_bad_input_is_one_line_and_exit_2(tmp_path, args, text, message):
    f = tmp_path / "frag.Dockerfile"
    if text is not None:
        f.write_text(text)
    argv = [a.replace("{f}", str(f)) for a in args]
    proc = run_cli("image", "build", *argv, subprocess_=True, timeout=300)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert message in proc.stderr and "Traceback" not in proc.stderr


def test_fragment_parsing_ignores_comments_and_continuations(tmp_path):
    f = tmp_path / "Dockerfile.vscode"
    f.write_text("# FROM in a comment is fine\nRUN echo a \\\n    FROM-not-an-instruction \\\n\n    b\nENV X=1\n")
    assert read_fragment(f).name == "vscode"
    f.write_text("RUN true\n  from scratch\n")
    with pytest.raises(ShinkenError, match=":2: FROM is not allowed"):
        read_fragment(f)
