"""GET /report/openapi.json: the API's contract, public."""

from django.http import JsonResponse

from api.auth import api_endpoint
from api.openapi import openapi_document


@api_endpoint(methods=("GET",), public=True)
def openapi(request):
    return JsonResponse(openapi_document(), json_dumps_params={"indent": 2})
