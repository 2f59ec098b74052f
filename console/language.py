"""The console's language: the header switch, the operator's stored choice, and its use on every request.

Precedence, highest first: the signed-in operator's stored choice (OperatorPreference), the language
cookie (the switch sets it, signed in or not), the browser's Accept-Language, LANGUAGE_CODE. The
cookie follows the stored choice, so the login page after a logout keeps the operator's language.
"""

from django.conf import settings
from django.contrib.auth.signals import user_logged_in
from django.dispatch import receiver
from django.http import HttpResponseRedirect
from django.utils import translation
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from console.models import OperatorPreference

# The session holds the language the operator chose (the switch) or stored (read at sign-in), so a
# request costs no query. A choice made signed out is stored when the operator signs in: the last
# choice made wins.
SESSION_LANGUAGE_KEY = "console_language"


def supported_language(code: str | None) -> str | None:
    """`code` when the console speaks it ("zh-Hans" and "zh-hans" alike), else None."""
    code = (code or "").strip().lower()
    return code if code in dict(settings.LANGUAGES) else None


def stored_language(user) -> str | None:
    preference = OperatorPreference.objects.filter(user=user).only("language").first()
    return supported_language(preference.language if preference else None)


def store_language(user, language: str) -> None:
    OperatorPreference.objects.update_or_create(user=user, defaults={"language": language})


def _set_cookie(response, language: str) -> None:
    response.set_cookie(
        settings.LANGUAGE_COOKIE_NAME,
        language,
        max_age=settings.LANGUAGE_COOKIE_AGE,
        path=settings.LANGUAGE_COOKIE_PATH,
        domain=settings.LANGUAGE_COOKIE_DOMAIN,
        secure=settings.LANGUAGE_COOKIE_SECURE,
        httponly=settings.LANGUAGE_COOKIE_HTTPONLY,
        samesite=settings.LANGUAGE_COOKIE_SAMESITE,
    )


class OperatorLanguageMiddleware:
    """After LocaleMiddleware and the session: the operator's choice wins over the browser's."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        session = getattr(request, "session", None)
        language = supported_language(session.get(SESSION_LANGUAGE_KEY)) if session is not None else None
        if language and language != request.LANGUAGE_CODE:
            translation.activate(language)
            request.LANGUAGE_CODE = language
        response = self.get_response(request)
        # Set at sign-in or by the switch during this request.
        language = supported_language(session.get(SESSION_LANGUAGE_KEY)) if session is not None else None
        if language and request.COOKIES.get(settings.LANGUAGE_COOKIE_NAME) != language:
            _set_cookie(response, language)
        return response


@receiver(user_logged_in, dispatch_uid="console-language-at-login")
def apply_language_at_login(sender, request, user, **kwargs):
    """A language picked while signed out becomes the stored choice; else the stored one applies."""
    session = getattr(request, "session", None)
    if session is None:
        return
    chosen = supported_language(session.get(SESSION_LANGUAGE_KEY))
    if chosen:
        store_language(user, chosen)
        return
    language = stored_language(user)
    if language:
        session[SESSION_LANGUAGE_KEY] = language
        translation.activate(language)
        request.LANGUAGE_CODE = language


@require_POST
def set_language(request):
    """The header switch (a plain form, no JavaScript needed): POST language and next."""
    language = supported_language(request.POST.get("language"))
    next_url = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(next_url, {request.get_host()}, require_https=request.is_secure()):
        next_url = "/console/"
    response = HttpResponseRedirect(next_url)
    if language is None:
        return response
    if request.user.is_authenticated:
        store_language(request.user, language)
    request.session[SESSION_LANGUAGE_KEY] = language
    _set_cookie(response, language)
    return response
