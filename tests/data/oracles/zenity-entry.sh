#!/bin/bash
# A solution of demo/zenity-entry that a screen recording shows: the name typed into the
# dialog a key at a time, then Enter.
set -e
export DISPLAY=${DISPLAY:-:0}
xset r off  # no key autorepeat: on a loaded machine a key's release can come late enough to repeat it
xdotool search --sync --name '^Shinken$' windowactivate --sync
sleep 0.5
xdotool type --delay 120 'Ada Lovelace'
sleep 0.5
xdotool key Return
sleep 1
