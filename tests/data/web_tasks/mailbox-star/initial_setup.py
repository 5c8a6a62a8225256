"""Initial setup (release shape, placeholder address): a fresh sid and the task's state
posted to the mailbox mock. It opens no browser: the hub state is the whole start state."""
import uuid

import requests

BASE_URL = '__CUA_GYM_MAILBOX_URL__'
sid = str(uuid.uuid4())
with open('/tmp/task_web_sid', 'w') as f:
    f.write(sid)

state = {
    "user": {"name": "Demo User", "email": "demo@example.com"},
    "messages": [
        {"id": "m1", "subject": "Quarterly report", "folder": "inbox", "starred": False},
        {"id": "m2", "subject": "Team lunch", "folder": "inbox", "starred": False},
        {"id": "m3", "subject": "Invoice 42", "folder": "inbox", "starred": True},
    ],
}
resp = requests.post(f'{BASE_URL}/post?sid={sid}', json={'action': 'set', 'state': state}, timeout=60)
assert resp.status_code == 200, f'State injection failed: {resp.text}'
# The page's first save (the app adds its view settings), as a browser would after loading.
resp = requests.post(f'{BASE_URL}/post?sid={sid}', json={'action': 'set_current', 'state': {**state, 'view': {'folder': 'inbox'}}},
                     timeout=60)
assert resp.status_code == 200, f'set_current failed: {resp.text}'
print(f'State injected: sid={sid}')
