"""Read-side queries for dead letters, the audit log and alerts (console and API call these)."""
