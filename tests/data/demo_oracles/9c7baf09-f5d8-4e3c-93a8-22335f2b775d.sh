# Solution of the VLC demo: the clip's frame size, read from the file.
ffprobe -v error -select_streams v:0 -show_entries stream=width,height -of csv=s=x:p=0 /home/user/Videos/clip.mp4 \
  > /home/user/frame_size.txt
