import os

# Pipeline-export shape: golden_patch.py beside this reward is the reference solution.
PATH = "/home/user/status.txt"
text = open(PATH, encoding="utf-8", errors="replace").read().strip() if os.path.exists(PATH) else None
print(f"{PATH}: {text!r}")
print("REWARD: 1.0" if text == "done" else "REWARD: 0.0")
