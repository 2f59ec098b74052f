"""Signed-in sessions end after SESSION_IDLE_TIMEOUT seconds without a request, and in any case
SESSION_ABSOLUTE_TIMEOUT seconds after sign-in (SESSION_COOKIE_AGE is the same cap, so the cookie
and the stored session go too). For the console, the admin and API calls made with a session."""

import time

from django.conf import settings
from django.contrib.auth import logout

STARTED = "_session_started_at"
SEEN = "_session_seen_at"
# The last-seen time is written at most this often: not a session save on every poll.
SEEN_RESOLUTION = 60


class SessionTimeoutMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.user.is_authenticated:
            self._check(request)
        return self.get_response(request)

    @staticmethod
    def _check(request) -> None:
        session, now = request.session, int(time.time())
        started, seen = session.get(STARTED), session.get(SEEN)
        idle = seen is not None and now - seen > settings.SESSION_IDLE_TIMEOUT
        too_old = started is not None and now - started > settings.SESSION_ABSOLUTE_TIMEOUT
        if idle or too_old:
            logout(request)  # the request goes on as anonymous: pages redirect to the login
            return
        if started is None:
            session[STARTED] = now
        if seen is None or now - seen >= min(SEEN_RESOLUTION, settings.SESSION_IDLE_TIMEOUT):
            session[SEEN] = now
