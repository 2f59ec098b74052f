"""DingTalk alerting: the outbox (rows born in the transaction of the event), the sender (a send
pass: pacing, digests, retries), the robot client and signing (client), message rendering
(messages), the per-robot shared state in Redis (ratelimit), delivery health for the console
(health) and the RQ entry point (jobs)."""
