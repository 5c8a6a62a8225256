"""Images and goldens are trusted by the digest their pusher recorded, not by a tag, labels or a
date (fleet/provenance.py, fleet/registry.py, fleet/golden_copy.py, sandbox/goldens.find_golden),
and the fleet's registry may require TLS and a login (Debian's docker-registry 2.8: `http.tls`,
`auth.htpasswd`).

The attacker here can push to the registry or load images into an engine: every image it makes
carries the labels of the golden it impersonates and, where it helps, a creation date in 2099."""

from __future__ import annotations

import base64
import json
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
import warnings
from pathlib import Path
from typing import Iterator

import pytest

from image_tar import load_image

with warnings.catch_warnings():  # deprecated in 3.11, but the one bcrypt (what htpasswd needs) on this Python
    warnings.simplefilter("ignore", DeprecationWarning)
    import crypt

pytestmark = [pytest.mark.docker]

DEMO = Path(__file__).resolve().parent.parent / "demo"
VENV_BIN = Path(sys.executable).parent


class _Registry:
    """Debian's docker-registry on a loopback port, optionally with TLS and htpasswd auth."""

    def __init__(self, base: Path, *, tls: bool = False, user: tuple[str, str] | None = None) -> None:
        from fleet_harness import free_port

        self.port = free_port()
        self.host_port = f"127.0.0.1:{self.port}"
        lines = ["version: 0.1", "log:", "  level: warn", "storage:", "  filesystem:",
                 f"    rootdirectory: {base / 'data'}", "  delete:", "    enabled: true", "http:",
                 f"  addr: {self.host_port}"]
        self.ca: Path | None = None
        if tls:
            self.ca = base / "ca.crt"
            subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                            "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(base / "key.pem"),
                            "-out", str(self.ca)], check=True, capture_output=True)
            lines += ["  tls:", f"    certificate: {self.ca}", f"    key: {base / 'key.pem'}"]
        if user is not None:
            (base / "htpasswd").write_text(f"{user[0]}:{crypt.crypt(user[1], crypt.mksalt(crypt.METHOD_BLOWFISH))}\n")
            lines += ["auth:", "  htpasswd:", "    realm: shinken-test", f"    path: {base / 'htpasswd'}"]
        (base / "config.yml").write_text("\n".join(lines) + "\n")
        self.log = open(base / "registry.log", "wb")
        self.proc = subprocess.Popen(["docker-registry", "serve", str(base / "config.yml")], stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        ctx = ssl._create_unverified_context()  # noqa: S323 - only waiting for it to listen
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{'https' if tls else 'http'}://{self.host_port}/v2/", timeout=2, context=ctx)
                return
            except urllib.error.HTTPError:
                return  # 401: up, and asking for credentials
            except OSError:
                assert self.proc.poll() is None and time.monotonic() < deadline, (base / "registry.log").read_text()
                time.sleep(0.2)

    def stop(self) -> None:
        from fleet_harness import stop_group

        stop_group(self.proc, wait_s=5)
        self.log.close()


class _Ledger:
    """The fleet's record, kept in a dict for these tests (fleet/provenance.FleetLedger keeps it in
    the fleet's Ray store; tests/test_fleet.py copies goldens through that one)."""

    def __init__(self) -> None:
        self.pins: dict = {}

    def record(self, pin) -> None:
        self.pins[pin.key] = pin

    def lookup(self, key: str):
        return self.pins.get(key)


def _golden_labels(bundle, base_id: str) -> dict[str, str]:
    from shinken.sandbox.goldens import GOLDEN_FORMAT, LABEL_GOLDEN_FORMAT, LABEL_GOLDEN_META
    from shinken.sandbox.ownership import LABEL_BASE_IMAGE, LABEL_BUNDLE_HASH, labels_for

    meta = {"uid": 1000, "gid": 1000, "build_seconds": 1.0, "lost_processes": [], "network": False}
    return labels_for("golden", task=bundle.id, extra={LABEL_BUNDLE_HASH: bundle.bundle_hash, LABEL_BASE_IMAGE: base_id,
                                                       LABEL_GOLDEN_FORMAT: GOLDEN_FORMAT,
                                                       LABEL_GOLDEN_META: json.dumps(meta)})


@pytest.fixture()
def task(docker_client) -> Iterator[tuple]:
    """(bundle, a base image id of its own, the images the test loaded, removed after it)."""
    from shinken.bundles.loader import load_bundle

    made: list[str] = []
    yield load_bundle(DEMO / "hello-file"), "sha256:" + uuid.uuid4().hex * 2, made
    for ref in made:
        try:
            docker_client.api.remove_image(ref, force=True)
        except Exception:  # noqa: BLE001 - gone with another name already
            pass


def test_the_served_golden_is_the_tagged_one_not_a_future_dated_lookalike(docker_client, task) -> None:
    """An image with the golden's labels and a creation date in 2099 (loaded by anyone with the
    engine, or left by a pull) is not served: the golden is the image its golden tag names (on
    f382b83 the newest `Created` among the labelled images won, for good)."""
    from shinken.sandbox.goldens import find_golden, golden_tag

    bundle, base_id, made = task
    labels = _golden_labels(bundle, base_id)
    legit = load_image(docker_client.api, golden_tag(bundle, base_id), labels=labels, payload=b"built here\n")
    forged = load_image(docker_client.api, f"shinken-test-forged/golden:{uuid.uuid4().hex[:8]}", labels=labels,
                        created="2099-01-01T00:00:00Z", payload=b"forged\n")
    made += [forged, legit]
    assert legit != forged
    found = find_golden(docker_client.api, bundle, base_id)
    assert found is not None and found.image_id == legit, (found, legit, forged)
    # With the golden's tag gone nothing is served, however many lookalikes carry its labels.
    docker_client.api.remove_image(golden_tag(bundle, base_id), noprune=True)
    made.remove(legit)
    assert find_golden(docker_client.api, bundle, base_id) is None


def test_a_golden_copy_pulls_the_recorded_digest_not_a_label_forged_push(docker_client, task, tmp_path: Path) -> None:
    """The host that built a golden pushes it and records its digest; an attacker then pushes a
    label-forged, future-dated image under the same registry tag. A host copying the golden gets
    the recorded one (on f382b83 it pulled the tag, found the labels right and served the forgery).
    A record whose image id does not match what its digest pulls leaves nothing tagged."""
    from shinken.fleet.golden_copy import GoldenCopier
    from shinken.fleet.provenance import Pin, golden_key
    from shinken.sandbox.docker_provider import DockerProvider
    from shinken.sandbox.goldens import find_golden, golden_from, golden_tag

    bundle, base_id, made = task
    api = docker_client.api
    reg = _Registry(tmp_path)
    try:
        repository = f"shinken-test/golden-copy-{uuid.uuid4().hex[:8]}"
        ledger = _Ledger()
        copier = GoldenCopier(reg.host_port, repository, ledger, host="builder", push_async=False)
        provider = DockerProvider(docker_client)
        labels = _golden_labels(bundle, base_id)
        legit = load_image(api, golden_tag(bundle, base_id), labels=labels, payload=b"built by the home host\n")
        made.append(legit)
        meta = json.loads(labels["shinken.golden_meta"])
        copier.push(provider, golden_from(bundle, legit, base_id, meta), bundle)
        pin = ledger.lookup(golden_key(repository, copier.tag(bundle, base_id)))
        assert pin is not None and pin.image_id == legit and pin.pushed_by == "builder"

        # The attacker's image, pushed over the golden's registry tag.
        remote = f"{reg.host_port}/{repository}"
        forged = load_image(api, f"{remote}:{copier.tag(bundle, base_id)}", labels=labels,
                            created="2099-01-01T00:00:00Z", payload=b"forged\n")
        made.append(forged)
        for _ in api.push(remote, tag=copier.tag(bundle, base_id), stream=True, decode=True):
            pass
        api.remove_image(f"{remote}:{copier.tag(bundle, base_id)}", force=True)  # only the registry has it now

        # Another host lacks the golden: the copy pulls the recorded digest.
        api.remove_image(golden_tag(bundle, base_id), force=True)
        assert find_golden(api, bundle, base_id) is None
        copied, note = copier.fetch(provider, bundle, base_id)
        assert note == "" and copied is not None and copied.image_id == legit, (note, copied, legit, forged)
        assert find_golden(api, bundle, base_id).image_id == legit

        # A record that names the forgery's digest with the golden's id: pulled, refused, untagged.
        api.remove_image(golden_tag(bundle, base_id), force=True)
        forged_digest = _manifest_digest(reg.host_port, repository, copier.tag(bundle, base_id))
        ledger.record(Pin.made(pin.key, forged_digest, legit))
        with pytest.raises(Exception, match="its pusher recorded"):
            copier.fetch(provider, bundle, base_id)
        assert find_golden(api, bundle, base_id) is None
        assert not [i for i in api.images(name=remote) if i.get("RepoTags") or i.get("RepoDigests")]
    finally:
        reg.stop()


def _manifest_digest(host_port: str, repository: str, tag: str) -> str:
    req = urllib.request.Request(f"http://{host_port}/v2/{repository}/manifests/{tag}", method="HEAD",
                                 headers={"Accept": "application/vnd.docker.distribution.manifest.v2+json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return str(resp.headers["Docker-Content-Digest"])


def _shinken(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([str(VENV_BIN / "shinken"), *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **env})


def test_a_registry_with_tls_and_a_login_and_pulls_by_digest(docker_client, task, tmp_path: Path) -> None:
    """`image push` / `image pull --digest` against a registry that serves TLS only and wants an
    htpasswd login: without the login one line naming `docker login`; with it (the machine's Docker
    credentials, the CA where the engine reads it) the push prints the digest and a pull of that
    digest brings back exactly that image even after the tag was pushed over (f382b83 spoke plain
    HTTP only and pulled whatever the tag named)."""
    from shinken.fleet.registry import CERTS_D

    _, _, made = task
    api = docker_client.api
    user, password = "fleet", "s3cret-" + uuid.uuid4().hex[:6]
    reg = _Registry(tmp_path, tls=True, user=(user, password))
    certs = CERTS_D / reg.host_port
    image = f"shinken-test/tls-{uuid.uuid4().hex[:8]}:v1"
    try:
        certs.mkdir(parents=True, exist_ok=True)
        shutil.copy(reg.ca, certs / "ca.crt")
        made.append(load_image(api, image, labels={"shinken.test": "tls"}, payload=b"the fleet's image\n"))
        url = f"https://{reg.host_port}"
        nobody = tmp_path / "no-login"
        nobody.mkdir()
        r = _shinken("image", "push", image, "--registry", url, env={"DOCKER_CONFIG": str(nobody)})
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and f"docker login {reg.host_port}" in lines[0], r.stderr
        r = _shinken("image", "push", image, "--registry", f"http://{reg.host_port}", env={"DOCKER_CONFIG": str(nobody)})
        assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr

        login = tmp_path / "login"
        login.mkdir()
        (login / "config.json").write_text(json.dumps({"auths": {reg.host_port: {
            "auth": base64.b64encode(f"{user}:{password}".encode()).decode()}}}))
        env = {"DOCKER_CONFIG": str(login)}
        r = _shinken("image", "push", image, "--registry", url, "--json", env=env)
        assert r.returncode == 0, r.stderr[-2000:]
        pushed = json.loads(r.stdout)
        assert pushed["digest"].startswith("sha256:") and pushed["id"] == made[-1]

        # Someone pushes another image over the tag; the digest still names the first.
        other = load_image(api, image, labels={"shinken.test": "tls"}, payload=b"someone else's\n",
                           created="2099-01-01T00:00:00Z")
        made.append(other)
        r = _shinken("image", "push", image, "--registry", url, env=env)
        assert r.returncode == 0, r.stderr[-2000:]
        api.remove_image(image, force=True)
        r = _shinken("image", "pull", image, "--registry", url, "--digest", pushed["digest"], "--json", env=env)
        assert r.returncode == 0, r.stderr[-2000:]
        assert json.loads(r.stdout)["id"] == pushed["id"] == api.inspect_image(image)["Id"]
        r = _shinken("image", "pull", image, "--registry", url, env=env)
        assert r.returncode == 2 and "--digest" in r.stderr, r.stderr
    finally:
        shutil.rmtree(certs, ignore_errors=True)
        reg.stop()
        try:
            api.remove_image(f"{reg.host_port}/{image}", force=True)  # the name `image push` tagged
        except Exception:  # noqa: BLE001 - not made when the push was refused
            pass
