"""Reading the list of records out of a JSON answer one record at a time.

json.loads of a 10 MiB answer of small objects builds a few hundred MB of Python objects. Here the
text is walked with the json module's own C scanner: containers on the way to the records are
stepped through, values off the way are decoded one at a time and dropped, and the records are
decoded one by one as they are read. At any moment the memory is the text plus one record (or the
largest value skipped), and the records can be read twice (columns first, then rows) for free.

Positions point at a value's first character; the text has no whitespace handling of its own
beyond what JSON allows between tokens."""

import json
from collections.abc import Iterator
from json.decoder import scanstring

from reports.errors import PermanentError, escape_controls

_DECODER = json.JSONDecoder()
_WHITESPACE = " \t\n\r"


class NotJson(PermanentError):
    def __init__(self):
        super().__init__("the source did not answer JSON")


def decode_text(body: bytes | bytearray) -> str:
    """The answer's text (UTF-8, or UTF-16/32 as json.loads would detect)."""
    try:
        return body.decode(json.detect_encoding(body), "surrogatepass")
    except (UnicodeDecodeError, LookupError):
        raise NotJson() from None


class JsonText:
    def __init__(self, text: str):
        self.text = text
        self.root = self._skip(0)
        try:
            end = self._end(self.root)
        except RecursionError:  # nesting deeper than Python's stack
            raise NotJson() from None
        if self._skip(end) != len(text):
            raise NotJson()

    def _skip(self, index: int) -> int:
        text, size = self.text, len(self.text)
        while index < size and text[index] in _WHITESPACE:
            index += 1
        return index

    def _end(self, index: int, *, in_array: bool = False) -> int:
        """Where the value at index ends. Arrays, and objects outside arrays (envelopes), are stepped
        through; anything else (a record, a scalar) is decoded by the C scanner and dropped."""
        char = self.text[index : index + 1]
        if char == "[" or (char == "{" and not in_array):
            first = self._skip(index + 1)
            if self.text[first : first + 1] == ("]" if char == "[" else "}"):
                return first + 1
            steps = self._items(index) if char == "[" else self._members(index)
            return max((step[-1] for step in steps), default=index)
        try:
            return _DECODER.raw_decode(self.text, index)[1]
        except (ValueError, RecursionError):
            raise NotJson() from None

    def kind(self, index: int) -> str:
        return {"{": "object", "[": "array"}.get(self.text[index : index + 1], "scalar")

    def _members(self, index: int) -> Iterator[tuple[str, int, int]]:
        """(key, value position, position after the object so far) for each member of an object."""
        text = self.text
        index = self._skip(index + 1)
        if text[index : index + 1] == "}":
            return
        while True:
            if text[index : index + 1] != '"':
                raise NotJson()
            try:
                key, index = scanstring(text, index + 1)
            except ValueError:
                raise NotJson() from None
            index = self._skip(index)
            if text[index : index + 1] != ":":
                raise NotJson()
            start = self._skip(index + 1)
            index = self._skip(self._end(start))
            closing = text[index : index + 1]
            if closing not in (",", "}"):
                raise NotJson()
            yield key, start, index + 1
            if closing == "}":
                return
            index = self._skip(index + 1)

    def _items(self, index: int, *, decode: bool = False) -> Iterator[tuple[object, int]]:
        """(item, or its position, and the position after the array so far) for each array item."""
        text = self.text
        index = self._skip(index + 1)
        if text[index : index + 1] == "]":
            return
        while True:
            start = index
            if decode:
                try:
                    value, index = _DECODER.raw_decode(text, start)
                except (ValueError, RecursionError):
                    raise NotJson() from None
            else:
                value, index = start, self._end(start, in_array=True)
            index = self._skip(index)
            closing = text[index : index + 1]
            if closing not in (",", "]"):
                raise NotJson()
            yield value, index + 1
            if closing == "]":
                return
            index = self._skip(index + 1)

    def members(self, index: int) -> Iterator[tuple[str, int]]:
        for key, start, _ in self._members(index):
            yield key, start

    def records(self, index: int) -> Iterator[object]:
        """The array's items, decoded one at a time."""
        for item, _ in self._items(index, decode=True):
            yield item

    def is_record_list(self, index: int) -> bool:
        return self.kind(index) == "array" and all(isinstance(item, dict) for item in self.records(index))


def find_records(doc: JsonText, records_path: str) -> int:
    """The position of the list of records: at records_path (dotted object keys), or with no path the
    answer itself when it is a list, else the shallowest list of objects inside it when there is
    exactly one (the demo source's `data.items`, most APIs' envelopes)."""
    if records_path:
        index = doc.root
        for key in records_path.split("."):
            found = None
            if doc.kind(index) == "object":
                found = next((start for name, start in doc.members(index) if name == key), None)
            if found is None:
                raise PermanentError(f"records_path: {key!r} not found in the response")
            index = found
        return _require_records(doc, index)
    level = [("", doc.root)]
    while level:
        found = [(path, index) for path, index in level if doc.is_record_list(index)]
        if len(found) > 1:
            paths = ", ".join(escape_controls(path) for path, _ in found[:5])
            raise PermanentError("the response holds several lists of objects; "
                                 f"set records_path to one of {paths}")
        if found:
            return found[0][1]
        level = [
            (f"{path}.{key}".lstrip("."), start)
            for path, index in level
            if doc.kind(index) == "object"
            for key, start in doc.members(index)
            if doc.kind(start) != "scalar"
        ]
    return _require_records(doc, doc.root)


def _require_records(doc: JsonText, index: int) -> int:
    if not doc.is_record_list(index):
        raise PermanentError("the response is not a list of objects")
    return index


def collect_columns(records) -> tuple[list, int]:
    """Every key of every record, in first-seen order, and the number of records: one dict
    insertion per key, so 20,000 distinct keys cost 20,000 steps, not 20,000 squared."""
    columns: dict = {}
    count = 0
    for record in records:
        columns.update(dict.fromkeys(record))
        count += 1
    return list(columns), count
