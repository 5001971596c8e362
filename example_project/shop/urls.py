from django.urls import path

from . import views

urlpatterns = [
    path("products/", views.products),
    path("catalog/", views.catalog),
    path("catalog/rebuild/", views.rebuild),
    path("products/<int:product_id>/buy/", views.buy),
    path("products/<int:product_id>/buy-unguarded/", views.buy_unguarded),
    path("products/<int:product_id>/buy-reserved/", views.buy_reserved),
    path("products/<int:product_id>/checkout/", views.checkout),
    path("orders/<int:order_id>/", views.order_status),
    path("orders/export/", views.export_orders),
    path("orders/<int:order_id>/pay/", views.pay),
    path("products/<int:product_id>/order/", views.place_order),
    path("products/<int:product_id>/order-unguarded/", views.place_order_unguarded),
    path("points/redeem/", views.redeem),
    path("points/transfer/", views.transfer_points),
]
