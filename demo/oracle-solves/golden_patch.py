# The reference solution: what the task generator ran to prove the task solvable.
with open("/home/user/status.txt", "w", encoding="utf-8") as f:
    f.write("done\n")
print("wrote /home/user/status.txt")
