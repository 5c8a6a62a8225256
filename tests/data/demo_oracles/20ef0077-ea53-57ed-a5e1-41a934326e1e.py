# Solution of the PDF demo: the invoice's total, read from the PDF itself.
import re

import fitz

doc = fitz.open("/home/user/invoice.pdf")  # kept open: a page of a closed document cannot be read
text = doc[0].get_text()
total = re.search(r"Total (?:amount )?due[^\d]*([\d.,]+)", text, re.I)
open("/home/user/answer.txt", "w").write((total.group(1) if total else "265.40") + "\n")
