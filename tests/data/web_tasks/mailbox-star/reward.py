"""Reward: read the sid back, fetch the mock's state, score it (partial credit)."""
import json
import urllib.request

BASE_URL = "__CUA_GYM_MAILBOX_URL__"


def main():
    with open("/tmp/task_web_sid") as f:
        sid = f.read().strip()
    with urllib.request.urlopen(BASE_URL + "/go?sid=" + sid, timeout=30) as resp:
        data = json.loads(resp.read().decode("utf-8"))
    initial = {m["id"]: m for m in data["initial_state"].get("messages", [])}
    current = {m["id"]: m for m in data["current_state"].get("messages", [])}
    print("state_diff keys:", sorted(data.get("state_diff") or {}))
    score = 0.0
    if current.get("m1", {}).get("starred") is True:
        score += 0.7
    others = all(current.get(k) == initial[k] for k in initial if k != "m1") and set(current) == set(initial)
    if score and others:
        score += 0.3
    print(f"REWARD: {score:.2f}")


main()
