# Solution of the Xfce Terminal demo: the number of ERROR lines of app.log.
grep -c ERROR /home/user/logs/app.log > /home/user/error_count.txt
