"""A Python traceback read the way an operator wants it (as Sentry shows one): the exception first,
then the frames most recent first, the project's own frames open and highlighted, runs of library
frames folded. Pure text in, plain data out: the template renders it, escaped."""

import re
from dataclasses import dataclass, field

_HEADER = "Traceback (most recent call last):"
_FRAME = re.compile(r'^\s*File "(?P<path>.+)", line (?P<line>\d+), in (?P<function>.+)$')
_CHAIN_NOTES = (
    "The above exception was the direct cause of the following exception:",
    "During handling of the above exception, another exception occurred:",
)
# Installed packages, the standard library and frozen/generated modules are "library" code.
_LIBRARY = re.compile(r"(/|\\)(site|dist)-packages(/|\\)|/lib/python\d+(\.\d+)?/|^<")
_PROJECT_PACKAGES = ("reports", "deadletters", "console", "api", "config")
# A runaway stack (thousands of frames) is shown by its most recent frames; the raw text has all.
FRAMES_SHOWN = 60


@dataclass
class Frame:
    path: str
    line: int
    function: str
    code: list[str] = field(default_factory=list)

    @property
    def is_library(self) -> bool:
        return bool(_LIBRARY.search(self.path))

    @property
    def short_path(self) -> str:
        """The path from the package on: `reports/kinds/http_export.py`, `requests/sessions.py`."""
        parts = re.split(r"[/\\]", self.path)
        if self.is_library:
            for marker in ("site-packages", "dist-packages"):
                if marker in parts:
                    return "/".join(parts[parts.index(marker) + 1 :])
            return self.path
        for index, part in enumerate(parts):
            if part in _PROJECT_PACKAGES:
                return "/".join(parts[index:])
        return self.path


@dataclass
class FrameRun:
    """Consecutive frames of one sort: project frames are shown, a library run is folded."""

    library: bool
    frames: list[Frame]


@dataclass
class Section:
    """One exception and the frames that led to it; `note` says how it relates to the one before."""

    frames: list[Frame] = field(default_factory=list)
    exception: list[str] = field(default_factory=list)
    note: str = ""

    @property
    def exception_text(self) -> str:
        return "\n".join(self.exception).strip()

    @property
    def runs(self) -> list[FrameRun]:
        """The FRAMES_SHOWN most recent calls, most recent first, in runs of project and library frames."""
        runs: list[FrameRun] = []
        for frame in reversed(self.frames[-FRAMES_SHOWN:]):
            if runs and runs[-1].library == frame.is_library:
                runs[-1].frames.append(frame)
            else:
                runs.append(FrameRun(library=frame.is_library, frames=[frame]))
        return runs

    @property
    def hidden_frame_count(self) -> int:
        return max(len(self.frames) - FRAMES_SHOWN, 0)

    @property
    def project_frame_count(self) -> int:
        return sum(not frame.is_library for frame in self.frames)


@dataclass
class ParsedTraceback:
    sections: list[Section]  # oldest first, as Python prints them

    @property
    def final(self) -> Section:
        return self.sections[-1]

    @property
    def earlier(self) -> list[Section]:
        """The exceptions raised before the final one (its causes or context), most recent first."""
        return list(reversed(self.sections[:-1]))


def parse_traceback(text: str) -> ParsedTraceback | None:
    """The traceback's sections, or None when the text is not a Python traceback (shown raw then)."""
    if not text or _HEADER not in text:
        return None
    sections: list[Section] = []
    section: Section | None = None
    note = ""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped == _HEADER:
            section = Section(note=note)
            sections.append(section)
            note = ""
            continue
        if section is None:
            continue  # anything before the first header (a log prefix) is not part of it
        if stripped in _CHAIN_NOTES:
            note = stripped
            continue
        match = _FRAME.match(line)
        if match and not section.exception:
            section.frames.append(
                Frame(path=match["path"], line=int(match["line"]), function=match["function"].strip())
            )
        elif section.frames and not section.exception and line.startswith("    "):
            section.frames[-1].code.append(line[4:].rstrip())
        elif section.frames and not section.exception and stripped.startswith("[Previous line repeated"):
            section.frames[-1].code.append(stripped)
        elif stripped or section.exception:
            section.exception.append(line.rstrip())
    if not sections or not any(s.frames or s.exception_text for s in sections):
        return None
    return ParsedTraceback(sections=sections)
