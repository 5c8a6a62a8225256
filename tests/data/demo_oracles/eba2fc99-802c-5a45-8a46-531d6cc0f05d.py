# Solution of the Writer demo: the first paragraph bold, its text kept.
from docx import Document

path = "/home/user/letter.docx"
doc = Document(path)
for run in doc.paragraphs[0].runs:
    run.bold = True
doc.save(path)
