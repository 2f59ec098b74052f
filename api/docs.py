"""GET /report/openapi.json: the API's contract, public."""

from django.http import JsonResponse

from api.auth import api_endpoint, authenticate
from api.errors import ApiError
from api.openapi import openapi_document


@api_endpoint(methods=("GET",), public=True)
def openapi(request):
    """Anonymous readers get the document without what names the site's configuration (the hosts
    http_export may fetch); a token or a console session, the whole document."""
    origin = request.build_absolute_uri("/").rstrip("/")
    try:
        authenticate(request, permission=None)
        public = False
    except ApiError:
        public = True
    return JsonResponse(openapi_document(server_url=origin, public=public), json_dumps_params={"indent": 2})
