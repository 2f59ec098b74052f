"""Alerting, one stack for every channel (the DingTalk robot, Feishu/Lark, WeCom, Slack, a signed
webhook, email): the outbox (one row per event and channel, born in the transaction of the event),
the sender (one pass: folding, digests, budgets, retries, probes), the renderer (one card per
message, in ALERT_LANGUAGE) and each channel's wire format (wire), the channels and their routing
(channels), their shared state in Redis (state), causes, snoozes and notices, delivery health for
the console (health) and the RQ entry point (jobs)."""
