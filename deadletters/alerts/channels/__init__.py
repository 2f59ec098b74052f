"""Alert channels beside the DingTalk robot: Feishu/Lark, WeCom, Slack, a signed webhook, email.

Each configured channel (ALERT_CHANNELS) gets its own delivery row per routed alert and its own
messages, rate budget, retries and pauses, so one channel that is down holds up no other:
config (parsing and routing), outbox (fan-out in the event's transaction), render (one neutral
card per message), http and email (the wire formats), state (rate limits in Redis), sender."""
