"""Dead-letter workflow, one module per action: letters (born with a task's death), replay,
transitions (archive, discard, restore), kind pauses, archive and purge. Bulk actions over many
letters are deadletters.bulk; the DingTalk outbox is deadletters.alerts."""
