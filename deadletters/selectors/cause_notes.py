"""The team's runbook note of each cause (written by deadletters.services.cause_notes), as the
console pages and the alert cards read it: in the active language (the page's, or ALERT_LANGUAGE
in an alert), else in the language it was written in."""

from dataclasses import dataclass
from datetime import datetime

from django.utils.translation import get_language

from config.languages import LANGUAGES
from deadletters.models import CauseState


@dataclass(frozen=True)
class CauseNote:
    texts: dict[str, str]  # language code -> text, only languages with text
    links: list[str]
    updated_by: str
    updated_at: datetime | None

    @property
    def ordered(self) -> list[tuple[str, str]]:
        """(language, text), the active language first."""
        return sorted(self.texts.items(), key=lambda item: item[0] != get_language())

    @property
    def fields(self) -> list[tuple[str, str, str]]:
        """(language, its name, the text) of every language a note may have: the edit form."""
        return [(code, name, self.texts.get(code, "")) for code, name in LANGUAGES]

    @property
    def line(self) -> str:
        """The first line that says something, in the active language if the note has it."""
        text = self.ordered[0][1] if self.texts else ""
        return next((line for line in text.splitlines() if line.strip()), "")


_FIELDS = ("note_text", "note_links", "note_by", "note_at")


def cause_notes(fingerprints) -> dict[str, CauseNote]:
    """The notes of these causes, by fingerprint (causes without one are left out)."""
    rows = CauseState.objects.filter(fingerprint__in=[f for f in fingerprints if f], note_at__isnull=False)
    notes = {row[0]: CauseNote(row[1] or {}, row[2] or [], *row[3:])
             for row in rows.values_list("fingerprint", *_FIELDS)}
    return {fingerprint: note for fingerprint, note in notes.items() if note.texts or note.links}


def cause_note(fingerprint: str) -> CauseNote | None:
    """The cause's note (empty when it has none); None when no letter ever had this fingerprint."""
    row = CauseState.objects.filter(fingerprint=fingerprint).values_list(*_FIELDS).first()
    return CauseNote(row[0] or {}, row[1] or [], *row[2:]) if row else None
