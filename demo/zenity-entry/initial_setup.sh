#!/bin/bash
# The dialog writes what was confirmed to answer.txt; it is (re)started after each fork.
set -e
cat > /home/user/ask_name.sh <<'SH'
#!/bin/bash
export DISPLAY=${DISPLAY:-:0}
rm -f /home/user/answer.txt
zenity --entry --title="Shinken" --text="Your name:" > /home/user/answer.tmp && mv /home/user/answer.tmp /home/user/answer.txt
SH
chmod +x /home/user/ask_name.sh
