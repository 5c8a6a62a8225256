# Solution of the Impress demo: a last slide titled 'Next steps'.
from pptx import Presentation

path = "/home/user/pitch.pptx"
prs = Presentation(path)
layout = next((lo for lo in prs.slide_layouts if lo.placeholders and lo.placeholders[0].placeholder_format.type == 1),
              prs.slide_layouts[0])
slide = prs.slides.add_slide(layout)
slide.shapes.title.text = "Next steps"
prs.save(path)
