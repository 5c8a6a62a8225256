"""Installing from the configured npm registry (lockfiles naming another host rewritten, their
integrity kept) and reading a failed build's log; no Docker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shinken.errors import ShinkenError
from shinken.mockweb.build import ErrorLines, first_error_line
from shinken.mockweb.registry import DEFAULT_REGISTRY, configured_registry, npm_config, rewrite_lockfile

REPO = Path(__file__).resolve().parent.parent
MAILBOX_LOCK = REPO / "tests" / "data" / "hub" / "websites" / "mailbox_mock" / "package-lock.json"


def _lock(resolved: dict[str, str]) -> bytes:
    pkgs: dict = {"": {"name": "x", "version": "1.0.0"}}
    for key, url in resolved.items():
        pkgs[key] = {"version": "1.0.0", "resolved": url, "integrity": f"sha512-{key}=="}
    return json.dumps({"name": "x", "lockfileVersion": 3, "requires": True, "packages": pkgs}, indent=2).encode()


def test_a_mirror_lockfile_is_moved_to_the_configured_registry_keeping_integrity() -> None:
    data = _lock({
        "node_modules/react": "https://registry.npmmirror.com/react/-/react-18.2.0.tgz",
        "node_modules/@babel/core": "https://registry.npmmirror.com/@babel/core/-/core-7.24.0.tgz",
        "node_modules/@types/node": "https://registry.npmmirror.com/@types%2fnode/-/node-20.0.0.tgz",
        "node_modules/vite": "https://registry.npmjs.org/vite/-/vite-5.4.21.tgz",
        "node_modules/lodash": "https://art.corp.example/api/npm/npm-remote/lodash/-/lodash-4.17.21.tgz",
        "node_modules/gitdep": "git+ssh://git@github.com/a/b.git#abc",
        "node_modules/plain": "https://example.org/downloads/plain.tgz",
    })
    reg = "https://npm.internal.example/repository/npm/"
    out, rw = rewrite_lockfile(data, reg)
    pkgs = json.loads(out)["packages"]
    assert pkgs["node_modules/react"]["resolved"] == reg + "react/-/react-18.2.0.tgz"
    assert pkgs["node_modules/@babel/core"]["resolved"] == reg + "@babel/core/-/core-7.24.0.tgz"
    assert pkgs["node_modules/@types/node"]["resolved"] == reg + "@types/node/-/node-20.0.0.tgz"
    assert pkgs["node_modules/vite"]["resolved"] == reg + "vite/-/vite-5.4.21.tgz"
    assert pkgs["node_modules/lodash"]["resolved"] == reg + "lodash/-/lodash-4.17.21.tgz"
    assert pkgs["node_modules/gitdep"]["resolved"].startswith("git+ssh://")  # not an http tarball: as written
    assert pkgs["node_modules/plain"]["resolved"] == "https://example.org/downloads/plain.tgz"
    before = json.loads(data)["packages"]
    assert all(pkgs[k]["integrity"] == before[k]["integrity"] for k in before if k)  # every hash kept
    assert rw.moved == {"registry.npmmirror.com": 3, "registry.npmjs.org": 1, "art.corp.example": 1}
    assert rw.foreign == ["https://example.org/downloads/plain.tgz"]
    lines = rw.log_lines()
    assert any("registry.npmmirror.com" in ln and "3 package" in ln and reg in ln for ln in lines)
    assert any("not registry tarballs" in ln for ln in lines)


def test_a_lockfile_already_on_the_registry_is_left_byte_for_byte() -> None:
    data = _lock({"node_modules/vite": "https://registry.npmjs.org/vite/-/vite-5.4.21.tgz"})
    out, rw = rewrite_lockfile(data, DEFAULT_REGISTRY)
    assert out is data and rw.moved == {} and rw.kept == 1
    assert "already resolves every package" in rw.log_lines()[0]
    # The stand-in's lockfile has no resolved URLs at all (npm then asks the configured registry).
    real = MAILBOX_LOCK.read_bytes()
    assert rewrite_lockfile(real, DEFAULT_REGISTRY)[0] is real
    assert rewrite_lockfile(b"{not json", DEFAULT_REGISTRY)[0] == b"{not json"


def test_a_v1_lockfile_is_rewritten_in_its_nested_dependencies() -> None:
    doc = {"lockfileVersion": 1, "dependencies": {"a": {
        "version": "1.0.0", "resolved": "https://registry.npmmirror.com/a/-/a-1.0.0.tgz", "integrity": "sha1-x",
        "dependencies": {"b": {"version": "2.0.0", "resolved": "https://registry.npmmirror.com/b/-/b-2.0.0.tgz",
                               "integrity": "sha1-y"}}}}}
    out, rw = rewrite_lockfile(json.dumps(doc).encode(), DEFAULT_REGISTRY)
    deps = json.loads(out)["dependencies"]
    assert deps["a"]["resolved"] == "https://registry.npmjs.org/a/-/a-1.0.0.tgz"
    assert deps["a"]["dependencies"]["b"]["resolved"] == "https://registry.npmjs.org/b/-/b-2.0.0.tgz"
    assert rw.total_moved == 2


def test_the_configured_registry_is_found_as_npm_finds_it(tmp_path: Path) -> None:
    assert configured_registry("https://r.example/npm", env={}, home=tmp_path) == ("https://r.example/npm/", "--registry")
    assert configured_registry(None, env={"npm_config_registry": "http://127.0.0.1:4873"}, home=tmp_path)[0] == \
        "http://127.0.0.1:4873/"
    (tmp_path / ".npmrc").write_text("fund=false\nregistry = https://npm.corp.example/\n")
    assert configured_registry(None, env={}, home=tmp_path) == ("https://npm.corp.example/", str(tmp_path / ".npmrc"))
    assert configured_registry(None, env={}, home=tmp_path / "none") == (DEFAULT_REGISTRY, "npm's default")
    with pytest.raises(ShinkenError, match="not an http"):
        configured_registry("registry.npmjs.org", env={}, home=tmp_path)


def test_the_first_error_line_of_a_build_log() -> None:
    npm = ["shinken: package-lock.json resolves 3 package(s) from registry.npmmirror.com; ...",
           "npm ERR! code ENOTFOUND", "npm ERR! syscall getaddrinfo", "npm ERR! errno ENOTFOUND",
           "npm ERR! network request to https://registry.npmmirror.com/react/-/react-18.2.0.tgz failed, reason: getaddrinfo ENOTFOUND registry.npmmirror.com",
           "npm ERR! A complete log of this run can be found in: /root/.npm/_logs/x.log"]
    assert first_error_line(npm).startswith("npm ERR! network request to https://registry.npmmirror.com")
    vite = ["> vite build", "vite v5.4.21 building for production...", "x Build failed in 695ms", "error during build:",
            "[vite:esbuild] Transform failed with 1 error:", "src/main.js:3:0: ERROR: Unexpected \"}\""]
    assert first_error_line(vite) == "error during build: [vite:esbuild] Transform failed with 1 error:"
    node = ["added 155 packages in 2m", "> vite build",
            "You are using Node.js 18.20.4. Vite requires Node.js version 20.19+ or 22.12+. Please upgrade your Node.js version.",
            "ReferenceError: CustomEvent is not defined", "Node.js v18.20.4"]
    assert first_error_line(node).startswith("You are using Node.js 18.20.4. Vite requires Node.js version 20.19+")
    assert first_error_line(["x", "TypeError: y is not a function", "z"]) == "TypeError: y is not a function"
    assert first_error_line(["all good", "exit 3"]) == "exit 3"
    # What a build keeps of its output (a vite build of the public hub's github app, as logged):
    # the message line after `error during build:` names no error, yet it is the one that says what broke.
    rollup = ["> vite build", "vite v5.4.21 building for production...", "transforming...", "✓ 2772 modules transformed.",
              "x Build failed in 3.65s", "error during build:",
              'src/components/Layout.jsx (4:13): "XitHub" is not exported by "node_modules/lucide-react/dist/esm/lucide-react.js", '
              'imported by "src/components/Layout.jsx".',
              "file: /hub/apps/github/src/components/Layout.jsx:4:13", "",
              "    at getRollupError (file:///hub/apps/github/node_modules/rollup/dist/es/shared/parseAst.js:401:41)"]
    kept = ErrorLines()
    for line in rollup:
        kept.take(line)
    assert kept.lines[:3] == rollup[4:7], kept.lines
    assert '"XitHub" is not exported' in first_error_line(kept.lines)
    assert first_error_line(kept.lines).startswith("error during build: src/components/Layout.jsx (4:13)")
    few = ErrorLines(limit=2)
    for line in ["error one:", "its message", "error two"]:
        few.take(line)
    assert few.lines == ["error one:", "its message"]
    assert first_error_line([]) == "no output"


def test_scoped_registries_and_credentials_are_read_as_npm_reads_them(tmp_path: Path) -> None:
    (tmp_path / ".npmrc").write_text(
        "registry=https://npm.corp.example/npm/\n"
        "@acme:registry=http://127.0.0.1:4873\n"
        "@other:registry = \"https://bob:s3cr%40t@other.example/r/\"\n"
        "//127.0.0.1:4873/:_authToken=${ACME_TOKEN}\n"
        "; a comment\n"
        "//npm.corp.example/npm/:_authToken=corp-token\n"
        "_authToken=ignored-when-the-registry-has-its-own\n"
        "fund=false\n")
    cfg = npm_config(None, env={"ACME_TOKEN": "tok-123"}, home=tmp_path)
    assert cfg.registry == "https://npm.corp.example/npm/" and cfg.source == str(tmp_path / ".npmrc")
    assert cfg.scopes == {"@acme": "http://127.0.0.1:4873/", "@other": "https://other.example/r/"}
    assert cfg.auth["//127.0.0.1:4873/:_authToken"] == "tok-123"  # ${VAR} read from the environment
    assert cfg.auth["//npm.corp.example/npm/:_authToken"] == "corp-token"
    assert cfg.auth["//other.example/r/:_auth"] == "Ym9iOnMzY3JAdA=="  # base64("bob:s3cr@t"), out of the URL
    assert cfg.registry_for("@acme/greet") == "http://127.0.0.1:4873/"
    assert cfg.registry_for("react") == cfg.registry_for("@types/node") == "https://npm.corp.example/npm/"
    rc = cfg.npmrc().decode()
    assert "@acme:registry=http://127.0.0.1:4873/\n" in rc and "//127.0.0.1:4873/:_authToken=tok-123\n" in rc
    logged = "\n".join(cfg.log_lines())
    assert "@acme packages install from http://127.0.0.1:4873/" in logged and "//127.0.0.1:4873/" in logged
    assert not any(s in logged for s in cfg.secrets()) and sorted(cfg.secrets()) == sorted(
        ["tok-123", "corp-token", "Ym9iOnMzY3JAdA=="])
    # $npm_config_userconfig names the file npm reads; an unset ${VAR} is named, not a traceback.
    other = tmp_path / "elsewhere.npmrc"
    other.write_text("//h.example/:_authToken=${MISSING}\n")
    with pytest.raises(ShinkenError, match=r"\$\{MISSING\}, which is not set"):
        npm_config(None, env={"npm_config_userconfig": str(other)}, home=tmp_path)
    assert npm_config(None, env={}, home=tmp_path / "none").auth == {}


def test_a_scoped_package_is_moved_to_its_scopes_registry() -> None:
    data = _lock({
        "node_modules/@acme/greet": "https://npm.acme.invalid/@acme/greet/-/greet-1.0.0.tgz",
        "node_modules/@acme/kept": "http://127.0.0.1:4873/@acme/kept/-/kept-2.0.0.tgz",
        "node_modules/@acme/wrongly-public": "https://registry.npmjs.org/@acme/wrongly-public/-/wrongly-public-1.0.0.tgz",
        "node_modules/react": "https://registry.npmmirror.com/react/-/react-18.2.0.tgz",
        "node_modules/@types/node": "https://registry.npmmirror.com/@types/node/-/node-20.0.0.tgz",
    })
    scoped = "http://127.0.0.1:4873/"
    out, rw = rewrite_lockfile(data, DEFAULT_REGISTRY, {"@acme": scoped})
    pkgs = json.loads(out)["packages"]
    assert pkgs["node_modules/@acme/greet"]["resolved"] == scoped + "@acme/greet/-/greet-1.0.0.tgz"
    assert pkgs["node_modules/@acme/kept"]["resolved"] == scoped + "@acme/kept/-/kept-2.0.0.tgz"
    assert pkgs["node_modules/@acme/wrongly-public"]["resolved"] == scoped + "@acme/wrongly-public/-/wrongly-public-1.0.0.tgz"
    assert pkgs["node_modules/react"]["resolved"] == DEFAULT_REGISTRY + "react/-/react-18.2.0.tgz"
    assert pkgs["node_modules/@types/node"]["resolved"] == DEFAULT_REGISTRY + "@types/node/-/node-20.0.0.tgz"
    assert rw.kept == 1 and rw.moved_to == {"npm.acme.invalid": {scoped: 1}, "registry.npmjs.org": {scoped: 1},
                                            "registry.npmmirror.com": {DEFAULT_REGISTRY: 2}}
    lines = rw.log_lines()
    assert any("from npm.acme.invalid; installing them from the registry configured for @acme http://127.0.0.1:4873/"
               in ln for ln in lines), lines
    assert any("2 package(s) from registry.npmmirror.com; installing them from the configured registry "
               f"{DEFAULT_REGISTRY}" in ln for ln in lines), lines
