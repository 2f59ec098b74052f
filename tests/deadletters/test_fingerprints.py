"""Fingerprint normalisation: deaths of one cause share a fingerprint, other causes do not."""

from deadletters.fingerprints import fingerprint, normalise_message


def test_variable_parts_of_a_message_are_replaced_by_placeholders():
    message = (
        "Timeout after 30.5s fetching https://x.example/a?b=1 for 'acme' id 0xdeadbeef "
        "123e4567-e89b-12d3-a456-426614174000 user bob@example.com"
    )

    expected = "Timeout after <n>s fetching <url> for <str> id <hex> <uuid> user <email>"
    assert normalise_message(message) == expected


def test_one_cause_with_other_numbers_ids_and_urls_has_one_fingerprint():
    first = fingerprint("requests.ConnectionError", "host-42:8080 refused after 3 tries (https://a/1)")
    second = fingerprint("requests.ConnectionError", "host-7:9090 refused after 10 tries (https://b/22)")

    assert first == second
    assert len(first) == 40 and int(first, 16) >= 0


def test_another_error_type_or_another_message_is_another_cause():
    base = fingerprint("ValueError", "bad parameter 'x'")

    assert fingerprint("TypeError", "bad parameter 'x'") != base
    assert fingerprint("ValueError", "missing parameter 'x'") != base


def test_whitespace_and_huge_messages_are_bounded():
    assert normalise_message("  a \n\t b  ") == "a b"
    assert len(normalise_message("word " * 10_000)) <= 500
