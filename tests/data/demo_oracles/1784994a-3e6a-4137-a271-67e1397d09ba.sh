# Solution of the xterm demo: cleanup.sh executable for its owner, run once.
chmod u+x /home/user/bin/cleanup.sh && /home/user/bin/cleanup.sh
