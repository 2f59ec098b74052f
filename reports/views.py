from django.http import JsonResponse
from django.views.decorators.http import require_GET

from reports.selectors import demo_orders_sample


@require_GET
def demo_orders_json(request):
    """A small JSON source on this very site, so http_export works out of the box."""
    return JsonResponse({"data": {"items": demo_orders_sample(limit=200)}})
