from django.urls import path

from . import views

urlpatterns = [
    path("limited/<int:product_id>/", views.limited),
    path("custom/<int:product_id>/", views.custom),
    path("alimited/<int:product_id>/", views.alimited),
    path("acustom/<int:product_id>/", views.acustom),
    path("fail-open/<int:product_id>/", views.fail_open),
    path("afail-open/<int:product_id>/", views.afail_open),
    path("cbv/<int:product_id>/", views.LimitedView.as_view()),
    path("acbv/<int:product_id>/", views.AsyncLimitedView.as_view()),
    path("item/<path:slug>/", views.item),
    path("raw/<path:slug>/", views.raw_item),
    *(
        path(f"{policy or 'default'}/{kind}/", view)
        for policy, user_views in views.USER_VIEWS.items()
        for kind, view in zip(("rate", "arate", "lock"), user_views, strict=True)
    ),
]
