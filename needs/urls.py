"""What a URL means for a task: a mock web app (placeholder or hosted mock host), the
task's own loopback service, a private address no sandbox reaches, a namespace that is
never fetched, or the internet. Triage only asks this of URLs that are fetched or opened
(docs/triage.md, "Network"); URLs that are data (a link in an email body, an avatar in
seeded state) never reach it."""

from __future__ import annotations

import ipaddress
import re
from typing import Any

PLACEHOLDER = re.compile(rb"__CUA_GYM_([A-Z0-9]+(?:_[A-Z0-9]+)*?)_(URL|HOST)__")
# The hub's hosted mocks, which some pipeline exports hard-code instead of placeholders:
# https://cua-gym-<app-with-hyphens>.xlang.ai (google-docs -> google_docs).
MOCK_HOST = re.compile(rb"(?i)\bcua-gym-([a-z0-9][a-z0-9-]*[a-z0-9])\.xlang\.ai\b")
URL = re.compile(rb"""(?:https?|wss?)://(\[[0-9A-Fa-f:]+\]|[A-Za-z0-9._\-]+)""")
# Hosts that appear as XML namespaces/identifiers or documentation examples, never fetched.
NAMESPACE_HOSTS = frozenset({
    "schemas.openxmlformats.org", "schemas.microsoft.com", "www.w3.org", "w3.org", "purl.org", "ns.adobe.com",
    "openoffice.org", "www.openoffice.org", "docs.oasis-open.org", "schemas.xmlsoap.org", "www.inkscape.org",
    "inkscape.org", "sodipodi.sourceforge.net", "creativecommons.org", "json-schema.org", "example.com",
    "www.example.com", "example.org", "xml.org", "www.xml.org", "schemas.android.com",
})

Need = list  # [kind, [alternatives...], where]


def mock_app(host: str) -> str | None:
    """`cua-gym-google-docs.xlang.ai` -> `google_docs` (None for any other host)."""
    m = MOCK_HOST.fullmatch(host.encode("ascii", "replace"))
    return m.group(1).decode().lower().replace("-", "_") if m else None


def host_need(host: str, where: str) -> Need | None:
    host = host.strip("[]").rstrip(".").lower()
    if not host or "__cua_gym_" in host or host in NAMESPACE_HOSTS:
        return None
    app = mock_app(host)
    if app is not None:
        return ["mock_host", [host, app], where]
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        ip = None
    if host == "localhost" or (ip is not None and (ip.is_loopback or ip.is_unspecified)):
        return None  # a service the task itself starts (or the desktop's CDP port)
    if ip is not None and (ip.is_private or ip.is_link_local):
        return ["private_host", [host], where]
    if "." in host:
        return ["network", [host], where]
    return None  # a bare word (`http://app`), or a placeholder left by the resolver


def fetched_url_needs(text: str | bytes, where: str) -> list[Need]:
    """Needs of URLs that ARE fetched or opened (a requests/urllib argument, a browser's
    argument, a download step's url)."""
    data = text.encode("utf-8", "replace") if isinstance(text, str) else text
    out = []
    for m in URL.finditer(data):
        need = host_need(m.group(1).decode("ascii", "replace"), where)
        if need is not None:
            out.append(need)
    return out


def file_url_needs(data: bytes, where: str, comment: bytes = b"#") -> list[Need]:
    """Every URL of a file that does network I/O, outside comments. The fallback when a
    file cannot be parsed, so what it fetches cannot be told from what it merely holds."""
    needs = []
    for m in URL.finditer(data):
        start = data.rfind(b"\n", 0, m.start()) + 1
        head = data[start : m.start()]
        hash_at = head.find(comment)
        if hash_at >= 0 and head.count(b'"', 0, hash_at) % 2 == 0 and head.count(b"'", 0, hash_at) % 2 == 0:
            continue  # in a comment (a `#` outside quotes before it)
        need = host_need(m.group(1).decode("ascii", "replace"), where)
        if need is not None and need[0] != "mock_host":  # mock hosts are found by mock_needs
            needs.append(need)
    return needs


def mock_needs(data: bytes, where: str) -> list[Need]:
    """Placeholders and hosted mock hosts anywhere in a file: either names the mock app the
    task runs against, whether the text fetches it or not."""
    out: list[Any] = []
    if b"__CUA_GYM_" in data:
        out.extend(["placeholder", [m.group(0).decode()], where] for m in PLACEHOLDER.finditer(data))
    if b"xlang.ai" in data:
        for m in MOCK_HOST.finditer(data):
            host = m.group(0).decode().lower()
            out.append(["mock_host", [host, m.group(1).decode().lower().replace("-", "_")], where])
    return out


# An instruction's URL is fetched only when the agent is told to go there; a meeting link or
# an address to type into a form is data. A navigation verb at most three words before the
# URL ("open the page", "read the article at") decides.
_NAV = re.compile(
    r"(?i)\b(?:open|visit|go\s+to|navigate\s+to|browse\s+to|browse|head\s+to|load|download|fetch|retrieve|"
    r"access|log\s*in\s+(?:to|at)|sign\s+(?:in|up)\s+(?:to|at|on)|register\s+(?:at|on)|search|look\s+up|"
    r"read|watch|play|stream|scrape|crawl|from)(?:[ \t]+[^\s.]+){0,3}[ \t]+$")


def instruction_url_needs(text: str, where: str = "instruction") -> list[Need]:
    out = []
    data = text.encode("utf-8", "replace")
    for m in URL.finditer(data):
        before = data[max(0, m.start() - 60) : m.start()].decode("utf-8", "replace")
        if not _NAV.search(before):
            continue
        need = host_need(m.group(1).decode("ascii", "replace"), where)
        if need is not None:
            out.append(need)
    return out
