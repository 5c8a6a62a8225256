"""Initial setup whose start state already satisfies the task (a zero-signal task)."""
import uuid

import requests

BASE_URL = '__CUA_GYM_MAILBOX_URL__'
sid = uuid.uuid4().hex
with open('/tmp/task_web_sid', 'w') as f:
    f.write(sid)
state = {"messages": [{"id": "m3", "subject": "Invoice 42", "folder": "inbox", "starred": True}]}
resp = requests.post(f'{BASE_URL}/post?sid={sid}', json={'action': 'set', 'state': state}, timeout=60)
assert resp.status_code == 200, resp.text
