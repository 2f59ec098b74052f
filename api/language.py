"""The language of an API answer's texts.

A client that asks for one of the console's languages in Accept-Language gets the texts the
console shares with the API (validation and refusal messages the services raise) in it; any other
client gets English, whatever LANGUAGE_CODE says: a script's log or an alert that quotes the answer
reads the same on every deployment. The API's own texts (authentication, the body, query
parameters, not found) are English only, as are `field` and every value.
"""

from django.utils.translation import get_supported_language_variant
from django.utils.translation.trans_real import parse_accept_lang_header

DEFAULT = "en"


def api_language(request) -> str:
    for code, _quality in parse_accept_lang_header(request.META.get("HTTP_ACCEPT_LANGUAGE", "")[:200]):
        if code == "*":
            break
        try:
            return get_supported_language_variant(code)
        except LookupError:
            continue
    return DEFAULT
