import os

PATH = "/home/user/hello.txt"
score = 0.0
if os.path.exists(PATH):
    text = open(PATH, encoding="utf-8", errors="replace").read().strip()
    print(f"found {PATH}: {text!r}")
    if text == "hello shinken":
        score = 1.0
    elif "hello" in text:
        score = 0.5
else:
    print(f"{PATH} does not exist")
print(f"REWARD: {score:.1f}")
