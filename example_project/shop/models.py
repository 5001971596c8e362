from django.conf import settings
from django.db import models

from django_redislock import Stock


class Product(models.Model):
    name = models.CharField(max_length=100)
    # Signed on purpose: the unguarded twin of the sale can drive it below zero.
    stock = models.IntegerField(default=0)
    # The fence of the last guarded sale written: a stale lock holder's write is refused.
    fence = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return self.name

    @property
    def units(self) -> Stock:
        """The product's units in Redis, for the sale by reservation (``buy_reserved``)."""
        return Stock(f"product:{self.pk}")

    def put_on_sale(self, quantity: int) -> None:
        """Set the stock, here and in Redis (where the sale by reservation takes it from)."""
        self.stock = quantity
        self.save(update_fields=["stock"])
        self.units.set(quantity)


class Order(models.Model):
    class Status(models.TextChoices):
        UNPAID = "unpaid"
        PAID = "paid"
        CLOSED = "closed"

    product = models.ForeignKey(Product, on_delete=models.PROTECT, related_name="orders")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.UNPAID)
    created = models.DateTimeField(auto_now_add=True)
    # A sale by reservation: the id of the units held in Redis for this order (paying
    # confirms them, closing releases them). Unique: a retried request cannot make two orders.
    reservation = models.CharField(max_length=64, null=True, blank=True, unique=True)


class PointsAccount(models.Model):
    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    balance = models.IntegerField(default=0)
    # The fence of the last redemption written: a stale lock holder's write is refused.
    fence = models.BigIntegerField(default=0)


class Redemption(models.Model):
    account = models.ForeignKey(PointsAccount, on_delete=models.CASCADE)
    points = models.PositiveIntegerField()
    fence = models.BigIntegerField()
    created = models.DateTimeField(auto_now_add=True)
