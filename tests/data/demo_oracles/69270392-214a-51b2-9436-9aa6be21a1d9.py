# Solution of the GIMP demo: logo.png scaled (not cropped) to 200x150, written back as PNG.
from PIL import Image

path = "/home/user/logo.png"
Image.open(path).convert("RGB").resize((200, 150)).save(path, "PNG")
