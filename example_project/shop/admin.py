from django.contrib import admin

from .models import Order, PointsAccount, Product, Redemption


@admin.register(Product)
class ProductAdmin(admin.ModelAdmin):
    list_display = ["name", "stock"]


@admin.register(Order)
class OrderAdmin(admin.ModelAdmin):
    list_display = ["id", "product", "status", "reservation", "created"]
    list_filter = ["status"]


@admin.register(PointsAccount)
class PointsAccountAdmin(admin.ModelAdmin):
    list_display = ["user", "balance", "fence"]


@admin.register(Redemption)
class RedemptionAdmin(admin.ModelAdmin):
    list_display = ["account", "points", "fence", "created"]
