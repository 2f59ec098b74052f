"""Read-side queries of the dead-letter layer, by subject: letters, audit, stats. Nothing here writes."""
