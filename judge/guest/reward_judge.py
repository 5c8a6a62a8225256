"""reward_judge: the LLM judge CUA-Gym rewards import, as shinken ships it.

shinken places this file at /tmp/reward_judge.py (and beside the reward) in a sandbox whose
run has a judge configured, with /tmp/reward_env holding OPENAI_BASE_URL / OPENAI_API_KEY.
It speaks the OpenAI chat-completions API to any compatible endpoint, with the standard
library only (the task image need not have the `openai` package). Inside a shinken sandbox
the endpoint is shinken's judge relay, reached through a Unix socket
(`http+unix://<percent-encoded socket path>/v1`); the relay sets the model and holds the
real API key, so neither is in the sandbox.

Same functions, arguments and return values as the upstream module rewards were written
for: each returns a float in [0, 1]. On failure it prints `SHINKEN_JUDGE_ERROR: ...` and
returns 0.0 (upstream's return value); shinken reads that line and reports the run as a
`judge_error` instead of a score, so a judge outage is never mistaken for a 0."""

import base64
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
from typing import Any, Callable, Dict, List, Tuple

ENV_FILE = "/tmp/reward_env"
ERROR_MARK = "SHINKEN_JUDGE_ERROR:"
_TEMPERATURE = 0.0
_RETRIES = 3
_TIMEOUT_S = 120.0

_SYSTEM_PROMPT = (
    "You are a precise task completion evaluator for computer-use agent training. Decide whether the "
    "state matches the expected outcome in the success criteria, on a 0.0-1.0 scale. Semantic "
    "equivalence and minor formatting differences are acceptable; missing or wrong information scores "
    "0.0 for that criterion; partial completion gets proportional credit; give no credit for vaguely "
    'related content. Respond with ONLY a JSON object: {"score": <float 0.0-1.0>, "reasoning": "<brief>"}'
)
_VISION_SYSTEM_PROMPT = (
    "You are a precise visual task completion evaluator for computer-use agent training. Compare the "
    "BEFORE image (initial state) with the AFTER image (after the agent acted) and judge whether the "
    "described operation was correctly applied, on a 0.0-1.0 scale. If AFTER shows no change or the wrong "
    "operation, score 0.0; partial completion gets proportional credit. Respond with ONLY a JSON object: "
    '{"score": <float 0.0-1.0>, "reasoning": "<brief>"}'
)


def _load_env_file(path: str = ENV_FILE) -> None:
    """KEY=VALUE lines written by shinken; variables already set win."""
    try:
        with open(path) as fh:
            for line in fh:
                line = line.strip()
                if "=" in line and not line.startswith("#"):
                    key, _, value = line.partition("=")
                    os.environ.setdefault(key.strip(), value.strip())
    except OSError:
        pass


_load_env_file()


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        http.client.HTTPConnection.__init__(self, "localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self._path)
        self.sock = s


def _endpoint() -> Tuple[Callable[[], http.client.HTTPConnection], str]:
    """(connection factory, request path prefix) for OPENAI_BASE_URL."""
    base = os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
    u = urllib.parse.urlsplit(base)
    prefix = u.path.rstrip("/")
    if u.scheme == "http+unix":
        path = urllib.parse.unquote(u.netloc)
        return (lambda: _UnixHTTPConnection(path, _TIMEOUT_S)), prefix
    if u.scheme == "https":
        return (lambda: http.client.HTTPSConnection(u.hostname or "", u.port, timeout=_TIMEOUT_S)), prefix
    if u.scheme == "http":
        return (lambda: http.client.HTTPConnection(u.hostname or "", u.port, timeout=_TIMEOUT_S)), prefix
    raise ValueError("OPENAI_BASE_URL %r: not an http(s) or http+unix URL" % base)


def _chat(messages: List[Dict[str, Any]], max_tokens: int) -> str:
    """The text of the first choice of a chat completion."""
    model = os.environ.get("SHINKEN_JUDGE_MODEL") or os.environ.get("OPENAI_MODEL") or "default"
    body = json.dumps({"model": model, "messages": messages, "temperature": _TEMPERATURE,
                       "max_tokens": int(max_tokens)}).encode("utf-8")
    headers = {"Content-Type": "application/json"}
    key = os.environ.get("OPENAI_API_KEY")
    if key:
        headers["Authorization"] = "Bearer " + key
    connect, prefix = _endpoint()
    conn = connect()
    try:
        conn.request("POST", prefix + "/chat/completions", body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
    finally:
        conn.close()
    if resp.status != 200:
        raise RuntimeError("judge endpoint answered HTTP %d: %s" % (resp.status, data[:300].decode("utf-8", "replace")))
    doc = json.loads(data.decode("utf-8"))
    return (doc["choices"][0]["message"]["content"] or "").strip()


def _score(text: str) -> float:
    try:
        value = float(json.loads(text)["score"])
    except (ValueError, KeyError, TypeError):
        m = re.search(r'"?score"?\s*[:=]\s*([0-9]*\.?[0-9]+)', text)
        if m is None:
            raise ValueError("no score in the judge's answer: %r" % text[:200])
        value = float(m.group(1))
    return max(0.0, min(1.0, value))


def _judge(label: str, messages: List[Dict[str, Any]], max_tokens: int) -> float:
    last: Exception = RuntimeError("no attempt made")
    for attempt in range(_RETRIES + 1):
        try:
            text = _chat(messages, max_tokens)
            score = _score(text)
            print("%s: score=%s | %s" % (label, score, text[:200].replace("\n", " ")))
            return score
        except Exception as exc:  # noqa: BLE001 - reported below, never raised into the reward
            last = exc
            if attempt < _RETRIES:
                time.sleep(0.5 * (attempt + 1))
    print("%s %s failed after %d attempts: %s: %s" % (ERROR_MARK, label, _RETRIES + 1, type(last).__name__, last))
    sys.stdout.flush()
    return 0.0


def call_llm_judge(task_instruction: str, success_criteria: str, state_excerpt: str, max_tokens: int = 300) -> float:
    """Score how well `state_excerpt` (usually JSON) meets `success_criteria`: 0.0-1.0."""
    prompt = ("TASK: %s\n\nSUCCESS CRITERIA:\n%s\n\nSTATE TO EVALUATE:\n%s\n\nScore 0.0-1.0 based on how well the "
              "state meets the success criteria.\nRespond with JSON only: {\"score\": <float>, \"reasoning\": \"<brief>\"}"
              % (task_instruction, success_criteria, str(state_excerpt)[:6000]))
    return _judge("LLM_JUDGE", [{"role": "system", "content": _SYSTEM_PROMPT},
                                {"role": "user", "content": prompt}], max_tokens)


_MIME = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif",
         ".webp": "image/webp", ".bmp": "image/bmp"}


def _image_part(path: str) -> Dict[str, Any]:
    with open(path, "rb") as fh:
        b64 = base64.b64encode(fh.read()).decode("ascii")
    mime = _MIME.get(os.path.splitext(path)[1].lower(), "image/png")
    return {"type": "image_url", "image_url": {"url": "data:%s;base64,%s" % (mime, b64)}}


def _vision(label: str, task_instruction: str, before: List[Dict[str, Any]], after: List[Dict[str, Any]],
            success_criteria: str, max_tokens: int) -> float:
    criteria = "\n\nADDITIONAL SUCCESS CRITERIA:\n%s" % success_criteria if success_criteria else ""
    content: List[Dict[str, Any]] = [{"type": "text", "text": "TASK: %s%s\n\nBEFORE (initial state):" % (task_instruction, criteria)}]
    content += before
    content.append({"type": "text", "text": "AFTER (result after the agent acted):"})
    content += after
    content.append({"type": "text", "text": 'Score 0.0-1.0 based on whether the task was correctly completed.\n'
                                            'Respond with JSON only: {"score": <float>, "reasoning": "<brief>"}'})
    return _judge(label, [{"role": "system", "content": _VISION_SYSTEM_PROMPT},
                          {"role": "user", "content": content}], max_tokens)


def call_vision_judge(task_instruction: str, initial_image: str, result_image: str, success_criteria: str = "",
                      max_tokens: int = 400) -> float:
    """Compare a BEFORE and an AFTER image (paths in this machine): 0.0-1.0."""
    for path, what in ((initial_image, "initial"), (result_image, "result")):
        if not os.path.isfile(path):
            # The agent may simply not have produced the file: a real 0, as upstream.
            print("VISION_JUDGE: %s image not found: %s; score=0.0" % (what, path))
            return 0.0
    return _vision("VISION_JUDGE", task_instruction, [_image_part(initial_image)], [_image_part(result_image)],
                   success_criteria, max_tokens)


def _frames(video: str, n: int) -> List[Dict[str, Any]]:
    """`n` frames spread over `video`, as image parts (ffmpeg)."""
    out: List[Dict[str, Any]] = []
    tmp = tempfile.mkdtemp(prefix="judge-frames-")
    try:
        probe = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "format=duration", "-of",
                                "default=nw=1:nk=1", video], capture_output=True, text=True, timeout=60)
        duration = float(probe.stdout.strip() or 0)
        for i in range(1, n + 1):
            frame = os.path.join(tmp, "f%d.png" % i)
            subprocess.run(["ffmpeg", "-v", "error", "-y", "-ss", "%.3f" % (duration * i / (n + 1)), "-i", video,
                            "-frames:v", "1", frame], capture_output=True, timeout=60)
            if os.path.isfile(frame):
                out.append(_image_part(frame))
    finally:
        for f in os.listdir(tmp):
            os.unlink(os.path.join(tmp, f))
        os.rmdir(tmp)
    return out


def call_video_vision_judge(task_instruction: str, initial_video: str, result_video: str, success_criteria: str = "",
                            num_frames: int = 3, max_tokens: int = 500) -> float:
    """Compare key frames of a BEFORE and an AFTER video: 0.0-1.0."""
    for path, what in ((initial_video, "initial"), (result_video, "result")):
        if not os.path.isfile(path):
            print("VIDEO_VISION_JUDGE: %s video not found: %s; score=0.0" % (what, path))
            return 0.0
    try:
        before, after = _frames(initial_video, num_frames), _frames(result_video, num_frames)
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        print("%s VIDEO_VISION_JUDGE could not extract frames: %s" % (ERROR_MARK, exc))
        return 0.0
    if not before or not after:
        print("%s VIDEO_VISION_JUDGE could not extract frames from the video(s)" % ERROR_MARK)
        return 0.0
    return _vision("VIDEO_VISION_JUDGE", task_instruction, before, after, success_criteria, max_tokens)
