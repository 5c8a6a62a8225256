import os

PATH = "/home/user/answer.txt"
if not os.path.exists(PATH):
    print("no answer was confirmed")
    print("REWARD: 0.0")
else:
    answer = open(PATH, encoding="utf-8", errors="replace").read().strip()
    print(f"answer: {answer!r}")
    print("REWARD: 1.0" if answer == "Ada Lovelace" else "REWARD: 0.0")
