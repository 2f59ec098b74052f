"""DingTalk alerting: the robot client and signing (dingtalk), message rendering (messages) and
the per-robot shared state in Redis (ratelimit). The outbox workflow is deadletters.services.alerts."""
