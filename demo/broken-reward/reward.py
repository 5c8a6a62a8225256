import os

# Defect kept on purpose: this reward never prints a REWARD line.
ok = os.path.exists("/home/user/status.txt")
print("status file present" if ok else "status file missing")
