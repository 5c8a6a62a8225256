# The correct solution, as the instruction asks.
with open("/home/user/report.txt", "w", encoding="utf-8") as f:
    f.write("ok\n")
