"""The languages of the console and the alerts."""

LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
