import os

# Defect kept on purpose: the instruction says /home/user/report.txt, the reward reads another
# path, so no correct solution can pass it (the oracle probe drops it as oracle_fails).
PATH = "/home/user/Documents/report.txt"
ok = os.path.exists(PATH) and open(PATH, encoding="utf-8", errors="replace").read().strip() == "ok"
print(f"{PATH}: {'ok' if ok else 'missing or wrong'}")
print("REWARD: 1.0" if ok else "REWARD: 0.0")
