from django.contrib import admin
from django.urls import include, path

from . import views

urlpatterns = [
    path("admin/", admin.site.urls),
    path("buy/<int:product_id>/", views.buy),
    path("buy-429/<int:product_id>/", views.buy_429),
    path("buy-custom/<int:product_id>/", views.buy_custom_busy),
    path("redeem/", views.redeem),
    path("fail-open/<int:product_id>/", views.fail_open),
    path("kw/<slug:slug>/", views.by_kwargs),
    path("kw-missing/<int:other>/", views.by_kwargs),
    path("attr/", views.bad_attribute),
    path("callable/<int:product_id>/", views.by_callable),
    path("boom/<int:product_id>/", views.boom),
    path("stream/<int:product_id>/", views.stream),
    path("abuy/<int:product_id>/", views.abuy),
    path("aredeem/", views.aredeem),
    path("afail-open/<int:product_id>/", views.afail_open),
    path("abuy-custom/<int:product_id>/", views.abuy_custom_busy),
    path("aboom/<int:product_id>/", views.aboom),
    path("astream/<int:product_id>/", views.astream),
    path("cbv/<int:product_id>/", views.BuyView.as_view()),
    path("acbv/<int:product_id>/", views.AsyncBuyView.as_view()),
    path("", include("shop.urls")),
]
