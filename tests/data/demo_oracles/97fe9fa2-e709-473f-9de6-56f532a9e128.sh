# Solution of the GNOME Terminal demo: every .log file copied into ~/backup.
mkdir -p /home/user/backup && cp /home/user/logs/*.log /home/user/backup/
