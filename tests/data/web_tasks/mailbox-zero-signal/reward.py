import json
import urllib.request

with open("/tmp/task_web_sid") as f:
    sid = f.read().strip()
with urllib.request.urlopen("__CUA_GYM_MAILBOX_URL__/go?sid=" + sid, timeout=30) as resp:
    current = json.loads(resp.read())["current_state"]
starred = any(m["subject"] == "Invoice 42" and m["starred"] for m in current.get("messages", []))
print(f"REWARD: {1.0 if starred else 0.0}")
