"""GET /report/openapi.json: the API's contract, public."""

from django.http import JsonResponse

from api.auth import api_endpoint
from api.openapi import openapi_document


@api_endpoint(methods=("GET",), public=True)
def openapi(request):
    origin = request.build_absolute_uri("/").rstrip("/")
    return JsonResponse(openapi_document(server_url=origin), json_dumps_params={"indent": 2})
