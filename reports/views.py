from django.conf import settings
from django.http import Http404, JsonResponse
from django.views.decorators.http import require_GET

from reports.selectors import demo_orders_sample


@require_GET
def demo_orders_json(request):
    """A small JSON source on this very site, so http_export works out of the box. Anonymous, so
    it exists only in the embedded demo setup: a deployment does not publish its orders table."""
    if not settings.DEMO_SETUP:
        raise Http404("no demo source outside the demo setup")
    return JsonResponse({"data": {"items": demo_orders_sample(limit=200)}})
