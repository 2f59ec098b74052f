"""The JSON API under /report/: the original report scheduler's contract (see api/openapi/)."""
