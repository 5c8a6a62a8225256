// The state a sid reads as before anything was posted for it (the app's built-in default).
export const DEFAULT_STATE = {
  user: { name: 'Demo User', email: 'demo@example.com' },
  messages: [
    { id: 'm1', subject: 'Welcome', folder: 'inbox', starred: false },
  ],
};
