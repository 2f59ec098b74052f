import random
from datetime import timedelta
from decimal import Decimal

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from reports.models import Order

REGIONS = ["north", "south", "east", "west", "central"]
PRODUCTS = ["widget", "gadget", "gizmo", "sprocket", "doohickey", "thingamajig"]


class Command(BaseCommand):
    help = "Create demo orders (the data sales_summary aggregates). Deterministic for a given --seed."

    def add_arguments(self, parser):
        parser.add_argument("--rows", type=int, default=10_000, help="orders to create (default 10000)")
        parser.add_argument("--seed", type=int, default=42, help="random seed (default 42)")
        parser.add_argument("--replace", action="store_true", help="delete existing orders first")
        parser.add_argument("--if-empty", action="store_true", help="do nothing when orders already exist")
        parser.add_argument("--batch-size", type=int, default=5000)

    def handle(self, *args, rows, seed, replace, if_empty, batch_size, verbosity, **options):
        if rows < 0 or batch_size <= 0:
            raise CommandError("--rows must be >= 0 and --batch-size > 0")
        if if_empty and Order.objects.exists():
            if verbosity:
                self.stdout.write("orders exist; nothing seeded")
            return
        if replace:
            deleted, _ = Order.objects.all().delete()
            if verbosity:
                self.stdout.write(f"deleted {deleted} orders")
        rng = random.Random(seed)
        now = timezone.now()
        made = 0
        while made < rows:
            size = min(batch_size, rows - made)
            Order.objects.bulk_create(
                Order(
                    ordered_at=now - timedelta(minutes=rng.randrange(60 * 24 * 365)),
                    region=rng.choice(REGIONS),
                    product=rng.choice(PRODUCTS),
                    customer=f"customer-{rng.randrange(1000):03d}",
                    quantity=rng.randint(1, 20),
                    unit_price=Decimal(rng.randrange(199, 99_999)) / 100,
                )
                for _ in range(size)
            )
            made += size
            if verbosity:
                self.stdout.write(f"seeded {made}/{rows} orders")
