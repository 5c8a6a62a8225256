#!/bin/sh
# Run once at image build (as root): the verifier, the uid reward.py runs as (never the task's
# user; sandbox/guest.py VERIFIER), gets its passwd entry, and the accessibility bus lets it in as
# the session bus does (dbus-session.conf), so a reward can read the task's apps' a11y tree.
set -e
if ! getent passwd shinken-verifier >/dev/null; then
    getent group shinken-verifier >/dev/null || groupadd --system --gid 64999 shinken-verifier
    useradd --system --uid 64999 --gid shinken-verifier --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin shinken-verifier
fi
conf=/usr/share/defaults/at-spi2/accessibility.conf
if [ -f "$conf" ] && ! grep -q shinken-verifier "$conf"; then
    sed -i 's|<allow user="root"/>|<allow user="root"/><allow user="shinken-verifier"/>|' "$conf"
    grep -q shinken-verifier "$conf"
fi
