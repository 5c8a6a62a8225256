import os

# The setup already created the file, so the untouched state scores 1.0: no signal.
print("REWARD: 1.0" if os.path.exists("/home/user/readme.txt") else "REWARD: 0.0")
