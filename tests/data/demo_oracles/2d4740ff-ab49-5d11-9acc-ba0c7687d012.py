# Solution of the Find and Replace demo: every 'colour' becomes 'color'.
from docx import Document

path = "/home/user/notes.docx"
doc = Document(path)
for p in doc.paragraphs:
    for run in p.runs:
        run.text = run.text.replace("colour", "color").replace("Colour", "Color")
doc.save(path)
