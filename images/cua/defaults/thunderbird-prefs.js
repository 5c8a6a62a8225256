// shinken/sandbox-cua: Thunderbird's defaults (read from /etc/thunderbird/pref; a profile's prefs.js
// still overrides them). No in-app notifications: Thunderbird 140 ships "prebaked" donation appeals
// (chrome://branding/content/inAppNotificationData.json, one runs 2026-12-01 .. 2027-03-31) that an
// idle start-up task opens as a foreground tab some seconds after the window is up. Offline it shows
// "Server Not Found"; whether it is open yet when the desktop is recorded or checked depends on timing,
// so a start state with Thunderbird differed between the golden and its relaunched forks.
pref("mail.inappnotifications.enabled", false);
