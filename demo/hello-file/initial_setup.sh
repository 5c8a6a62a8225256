#!/bin/bash
# Start from a clean slate: a notes folder and no hello.txt.
set -e
mkdir -p /home/user/notes
echo "remember: the greeting goes in hello.txt" > /home/user/notes/todo.txt
rm -f /home/user/hello.txt
