"""Bulk actions over many dead letters, run in the background by an RQ job.

selection (what it touches, the preview) -> control (start, pause, resume, cancel) ->
runner (the job body; throttle paces it, watch pauses a replay whose tasks die again) -> jobs.

Lifecycle of a BulkAction row (each change one conditional UPDATE):

    pending --job claims--> running --all done--> completed
       ^                      |  \\--died-again ratio over threshold / operator--> paused
       |                      |                                                   |
       +------ resume --------+---------------------------------------------------+
    pending | running | paused --operator--> cancelled;  unexpected error --> failed (resumable)

The selection is a snapshot taken at start: either the selected ids, or the list filter plus the
highest dead-letter id at that moment (`filters["max_id"]`), so letters that die after the start
are never included. The runner walks the selection in id order with a keyset cursor
(`last_processed_id`), one short transaction per batch that applies the action to the batch as a
set (apply: a handful of statements and one pipelined enqueue, whatever the batch size) and
advances the cursor with a compare-and-set. A runner that dies mid-way loses at most its
uncommitted batch; resuming (or the housekeeper's stalled-bulk duty) enqueues a new job that carries
on after the cursor. Duplicate deliveries are harmless: the cursor CAS lets only one runner's
batch count, and a Redis lock keeps a second runner waiting.

The operator can change a running action's rate from its page (control.change_bulk_rate,
audited); the runner's throttle picks it up within a second. A run works in time slices
(BULK_ACTION_SLICE_SECONDS) and re-enqueues itself, so one big bulk never holds a worker (or a
job timeout) for hours.
"""
