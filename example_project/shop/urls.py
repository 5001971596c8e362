from django.urls import path

from . import views

urlpatterns = [
    path("products/", views.products),
    path("products/<int:product_id>/buy/", views.buy),
    path("products/<int:product_id>/buy-unguarded/", views.buy_unguarded),
    path("orders/<int:order_id>/pay/", views.pay),
    path("points/redeem/", views.redeem),
]
