from django.urls import path

from reports import views

app_name = "reports"

urlpatterns = [
    path("demo/orders.json", views.demo_orders_json, name="demo-orders-json"),
]
