"""What Django's error reports (the DEBUG page, mailed 500 reports) may show of settings and locals.

Django hides settings whose names look secret (KEY, SECRET, PASS, TOKEN...). Ours also carry
secrets in URLs: DATABASE_URL and REDIS_URL (a password in the netloc, copied into DATABASES and
RQ_QUEUES) and DINGTALK_WEBHOOK (the robot's access_token in the query); ALERT_CHANNELS holds
channel URLs whose secret may be a path segment, so it is hidden whole. Under runserver the
environment is part of request.META as well, so the same names are hidden there.
"""

import re

from django.views.debug import SafeExceptionReporterFilter

from config.masking import mask_url_secrets

__all__ = ["SafeSettingsFilter", "mask_url_secrets"]


class SafeSettingsFilter(SafeExceptionReporterFilter):
    hidden_settings = re.compile(
        "API|AUTH|TOKEN|KEY|SECRET|PASS|SIGNATURE|HTTP_COOKIE|WEBHOOK|DATABASE_URL|REDIS_URL|ALERT_CHANNELS",
        flags=re.I,
    )

    def cleanse_setting(self, key, value):
        cleansed = super().cleanse_setting(key, value)
        # type(), not isinstance(): lazy objects (axes' AXES_USERNAME_FORM_FIELD) pass for str.
        return mask_url_secrets(cleansed) if type(cleansed) is str else cleansed

    def get_traceback_frame_variables(self, request, tb_frame):
        return [
            (name, mask_url_secrets(value) if type(value) is str else value)
            for name, value in super().get_traceback_frame_variables(request, tb_frame)
        ]
