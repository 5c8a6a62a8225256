# A reference solution that does only half of the work (alpha.txt, not beta.txt).
with open("/home/user/alpha.txt", "w", encoding="utf-8") as f:
    f.write("alpha\n")
