import os

# Two weighted components; this task's golden_patch.py only does the first (half-solves).
score = 0.0
for name, want in (("alpha.txt", "alpha"), ("beta.txt", "beta")):
    path = f"/home/user/{name}"
    ok = os.path.exists(path) and open(path, encoding="utf-8", errors="replace").read().strip() == want
    print(f"{path}: {'ok' if ok else 'missing or wrong'}")
    score += 0.5 if ok else 0.0
print(f"REWARD: {score}")
