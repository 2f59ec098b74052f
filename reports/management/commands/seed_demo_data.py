import argparse
import random
from datetime import timedelta
from decimal import Decimal

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone
from django.utils.translation import gettext

from reports.models import Order

REGIONS = ["north", "south", "east", "west", "central"]
PRODUCTS = ["widget", "gadget", "gizmo", "sprocket", "doohickey", "thingamajig"]


class Command(BaseCommand):
    help = (
        "Create demo orders (the data sales_summary aggregates), deterministic for a given --seed. "
        "Idempotent: when orders exist it changes nothing and says so; --replace starts over."
    )

    def add_arguments(self, parser):
        parser.add_argument("--rows", type=int, default=10_000, help="orders to create (default 10000)")
        parser.add_argument("--seed", type=int, default=42, help="random seed (default 42)")
        parser.add_argument("--replace", action="store_true", help="delete existing orders first")
        # Kept for scripts written before seeding became idempotent: it is what every run does now.
        parser.add_argument("--if-empty", action="store_true", help=argparse.SUPPRESS)
        parser.add_argument("--batch-size", type=int, default=5000)

    def handle(self, *args, rows, seed, replace, if_empty, batch_size, verbosity, **options):
        if rows < 0 or batch_size <= 0:
            raise CommandError(gettext("--rows must be >= 0 and --batch-size > 0"))
        existing = Order.objects.count()
        if existing and not replace:
            # A second run must not double every sales figure.
            if verbosity:
                self.stdout.write(
                    gettext(
                        "%(existing)d demo orders already exist; nothing seeded (--replace deletes them and "
                        "seeds %(rows)d afresh)."
                    )
                    % {"existing": existing, "rows": rows}
                )
            return
        if replace:
            deleted, _ = Order.objects.all().delete()
            if verbosity:
                self.stdout.write(gettext("deleted %(n)d orders") % {"n": deleted})
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
            if verbosity > 1:
                self.stdout.write(gettext("seeded %(made)d/%(rows)d orders") % {"made": made, "rows": rows})
        if verbosity:
            self.stdout.write(
                gettext("seeded %(n)d demo orders (seed %(seed)d).") % {"n": made, "seed": seed})
