package postgres

// LockEvents is the advisory lock every event-appending transaction holds.
const LockEvents = lockEvents
