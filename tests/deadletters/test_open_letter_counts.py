"""The open-letter counts the triggers keep equal a count of the table after every kind of write:
single and many-row inserts, status changes back and forth, deletes, a raw SQL statement."""

import pytest
from django.db import connection
from django.db.models import Count

from deadletters.models import DeadLetter, DeadLetterStatus, OpenLetterCount
from deadletters.services.archive import archive_expired_dead_letters
from tests.factories import make_dead_letter

pytestmark = pytest.mark.django_db


def counted() -> dict:
    return {
        (k, f): n
        for k, f, n in OpenLetterCount.objects.filter(count__gt=0).values_list("kind", "fingerprint", "count")
    }


def actual() -> dict:
    rows = (
        DeadLetter.objects.filter(status=DeadLetterStatus.OPEN)
        .values_list("kind", "fingerprint")
        .annotate(n=Count("pk"))
    )
    return {(k, f): n for k, f, n in rows}


def test_the_counts_follow_every_write():
    letters = [make_dead_letter(error_message=f"cause {i % 3}") for i in range(9)]
    assert counted() == actual() and sum(actual().values()) == 9

    DeadLetter.objects.filter(pk__in=[letter.pk for letter in letters[:4]]).update(
        status=DeadLetterStatus.ARCHIVED
    )
    assert counted() == actual() and sum(actual().values()) == 5
    DeadLetter.objects.filter(pk=letters[0].pk).update(status=DeadLetterStatus.OPEN)
    DeadLetter.objects.filter(pk=letters[5].pk).update(kind="sales_summary")
    DeadLetter.objects.filter(pk__in=[letter.pk for letter in letters]).update(
        error_message="same status, other text"
    )
    assert counted() == actual()
    DeadLetter.objects.filter(pk__in=[letter.pk for letter in letters[:2]]).delete()
    table = DeadLetter._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET status = 'discarded' WHERE id = %s", [letters[6].pk])
        cursor.execute(f"DELETE FROM {table} WHERE id = %s", [letters[7].pk])
    assert counted() == actual() and sum(actual().values()) == 3


def test_the_archiver_moves_letters_out_of_the_counts(settings):
    from datetime import timedelta

    from django.utils import timezone

    for i in range(5):
        make_dead_letter(error_message=f"old {i % 2}", expire_at=timezone.now() - timedelta(hours=1))
    make_dead_letter(error_message="fresh")

    archive_expired_dead_letters()

    assert counted() == actual() and sum(actual().values()) == 1
