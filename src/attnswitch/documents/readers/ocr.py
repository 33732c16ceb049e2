"""OCR: the text of scanned pages and images, recognised by Tesseract.

- Images (`.png`, `.jpg`/`.jpeg`, `.tif`/`.tiff`, also known by content): opened with
  Pillow and recognised; a multi-page TIFF gives one `Location(page=n)` per frame. An
  image of more than `max_pixels` pixels is skipped as too large before it is decoded.
- PDF pages with no text layer: the PDF reader hands their numbers to
  `ocr_pdf_pages`, which renders each with pypdfium2 (PDFium, Chrome's PDF renderer) at
  `ocr_dpi` and recognises it, `ocr_workers` pages at a time (one Tesseract process
  each; 0: one per CPU).

Tesseract runs as its command-line program (`readers.tesseract`; Debian's `tesseract-ocr`
with `tesseract-ocr-eng`), one thread per page, at most `ocr_timeout_s` per call. Each
page is read with the language packs `readers.ocr_languages` picks (`read_best`): first
with the chosen languages (`ocr_languages`, by default the system locale's and English);
a reading whose words Tesseract is sure of (`SURE_CONFIDENCE`, its mean word
confidence) is kept as it is, so a page in the chosen languages costs one Tesseract run.
Otherwise Tesseract's script detection (OSD) finds the page's script, and where none of
the chosen packs reads it, the page is read again with the packs of that script and the
reading Tesseract is surer of is kept. OSD errs on screenshots and short text (an
English installer screen taken for Arabic or Hebrew), which the first reading then
survives; it ran before every page, and doubled the time an image took.
Where OCR is off (`ReadOptions(ocr=False)`), or Tesseract or one of `ocr_languages` is
not installed, nothing is recognised and the pages say so: an image is skipped
(`Skip.NEEDS_OCR`) with the reason, and a PDF's pages are listed in `Extracted.failed`
(or the PDF is skipped when no page has text); never silently empty. So is a page whose
script no installed pack reads ("Tesseract has no data for the Korean script (Debian:
tesseract-ocr-kor)") and which the chosen packs do not read either (a mean word
confidence under `READS_CONFIDENCE`): it is not read as noise by the packs of another
script. The text
Tesseract gives is cut into paragraph blocks at its blank lines. A page read before (the same image, packs
and Tesseract build) is not read again: its text is kept by content (`readers.ocr_cache`).
"""

from __future__ import annotations

import dataclasses
import io
import os
import shutil
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from attnswitch.documents.readers.blocks import Block, BlockKind, Extracted, Location, ReadOptions
from attnswitch.documents.readers.ocr_cache import cached_text, keep_text, page_key
from attnswitch.documents.readers.ocr_languages import NoPack, OcrLanguages, resolve
from attnswitch.documents.readers.skip import Skip, Skipped
from attnswitch.documents.readers.tesseract import (
    Reading,
    build,
    detect_script,
    installed_packs,
    read_page,
    recognise_png,
)

_POINTS_PER_INCH = 72
# Tesseract's mean word confidence (0-100) of a reading by the chosen packs that is kept
# without finding the page's script. Pages read by packs of their script gave 91-96;
# pages of other scripts read by English 28-47 (`tesseract.Reading`).
SURE_CONFIDENCE = 80.0
# The least mean word confidence of a reading by the chosen packs kept for a page whose
# script (by OSD) no installed pack reads; under it the page is said to need that pack.
READS_CONFIDENCE = 60.0


class OcrUnavailable(Exception):
    """No page can be recognised under these options; the message says why."""


def ocr_languages(options: ReadOptions) -> OcrLanguages:
    """The language packs pages are read with under `options` (`readers.ocr_languages`);
    `OcrUnavailable` saying why none can be: "OCR is off", "Tesseract is not installed
    (Debian: tesseract-ocr)", or a chosen language's pack is not installed."""
    if not options.ocr:
        raise OcrUnavailable("OCR is off")
    if shutil.which("tesseract") is None:
        raise OcrUnavailable("Tesseract is not installed (Debian: tesseract-ocr)")
    try:
        languages = resolve(options.ocr_languages, options.ocr_detect, installed_packs())
        return dataclasses.replace(languages, build=build())
    except (RuntimeError, LookupError) as exc:  # Tesseract does not run; a pack is missing
        raise OcrUnavailable(str(exc)) from None


def recognise(image, options: ReadOptions, languages: OcrLanguages | None = None) -> str:
    """The text Tesseract reads in a Pillow image with the packs `languages` picks for it
    (None: `ocr_languages(options)`'s): the best reading (`read_best`) where
    `languages.detect`, else the chosen packs'. `RuntimeError` when Tesseract fails or takes more than
    `ocr_timeout_s`; `NoPack` when the page's script has no installed pack. The image goes
    to the `tesseract` program as a PNG on its standard input. A page read before (the same
    image, packs and Tesseract build) is not read again: its text comes from `ocr_cache`."""
    if languages is None:
        languages = ocr_languages(options)
    png = io.BytesIO()
    image.save(png, format="PNG")
    data = png.getvalue()
    key = page_key(data, languages)
    text = cached_text(key)
    if text is None:
        if languages.detect:
            text = read_best(data, languages, options.ocr_timeout_s)
        else:
            text = recognise_png(data, languages.for_script(None), options.ocr_timeout_s)
        keep_text(key, text)
    return text


def read_best(png: bytes, languages: OcrLanguages, timeout_s: float) -> str:
    """The text of a page image (PNG bytes) read as the module says: by the chosen packs,
    kept when Tesseract is sure of it (`SURE_CONFIDENCE`) or it has no words; else the
    page's script found (OSD) and, where `second_packs` names other packs, the page read
    by them too and the reading of higher mean word confidence kept (the first on a tie).
    `NoPack` when the script has no installed pack and the chosen packs do not read the
    page either; `RuntimeError` when Tesseract fails or takes more than `timeout_s`."""
    first = read_page(png, languages.for_script(None), timeout_s)
    if first.confidence >= SURE_CONFIDENCE or not first.words:
        return first.text
    packs = second_packs(first, detect_script(png, timeout_s), languages)
    if packs is None:
        return first.text
    second = read_page(png, packs, timeout_s)
    return (second if second.confidence > first.confidence else first).text


def second_packs(first: Reading, script: str | None, languages: OcrLanguages) -> str | None:
    """After the chosen packs read a page as `first` (unsure: under `SURE_CONFIDENCE`) and
    OSD found it in `script` (None: none found): the packs to read it with again, or None
    to keep `first` (the chosen packs read the script, OSD found none, or the script has
    no installed pack and `first` reads well enough: `READS_CONFIDENCE`); `NoPack` when
    the script has no installed pack and `first` does not read."""
    try:
        packs = languages.for_script(script)
    except NoPack:
        if first.confidence >= READS_CONFIDENCE:
            return None
        raise
    return None if packs == first.packs else packs


def paragraphs(text: str, where: Location) -> list[Block]:
    """Tesseract's text as paragraph blocks: runs of lines between blank lines."""
    out = []
    for run in text.replace("\r\n", "\n").split("\n\n"):
        joined = " ".join(run.split())
        if joined:
            out.append(Block(BlockKind.PARAGRAPH, joined, where))
    return out


def read_image(data: bytes, options: ReadOptions) -> Extracted:
    """The text in an image (see the module); `Skipped` when OCR is off or unavailable,
    the image is unreadable or too large, no text is recognised, or no installed pack
    reads its script (`Skip.NEEDS_OCR`, naming the Debian package). The size of every
    frame to be read is checked before any is decoded; frames past `ocr_max_pages` are
    neither checked nor read, and are listed in `Extracted.failed`."""
    from PIL import Image, ImageSequence, UnidentifiedImageError

    try:
        image = Image.open(io.BytesIO(data))
        kind = (image.format or "image").upper()
        frames = getattr(image, "n_frames", 1)
        read = min(frames, options.ocr_max_pages)
        for index in range(read):  # seeking reads a frame's header, not its pixels
            image.seek(index)
            width, height = image.size
            if width * height > options.max_pixels:
                where = f" frame {index + 1}" if frames > 1 else ""
                raise Skipped(
                    Skip.TOO_LARGE,
                    f"{kind}{where} of {width}x{height} pixels, "
                    f"more than the limit {options.max_pixels}",
                )
        image.seek(0)
    except UnidentifiedImageError:
        raise Skipped(
            Skip.CORRUPT,
            "image: not an image Pillow can read (broken, or another format under an image's name)",
        ) from None
    except Image.DecompressionBombError as exc:  # past Pillow's own limit, said as ours
        raise Skipped(Skip.TOO_LARGE, f"image: {exc}") from None
    except (OSError, ValueError, SyntaxError, EOFError) as exc:
        raise Skipped(Skip.CORRUPT, f"image: {type(exc).__name__}: {exc}") from None
    try:
        languages = ocr_languages(options)
    except OcrUnavailable as exc:
        raise Skipped(Skip.NEEDS_OCR, f"{kind} image: {exc}") from None
    blocks: list[Block] = []
    failed: list[str] = []
    no_pack: list[str] = []  # the frames whose script has no installed pack
    try:
        for number, frame in enumerate(ImageSequence.Iterator(image), start=1):
            if number > read:
                break
            where = Location(page=number) if frames > 1 else Location()
            try:
                blocks += paragraphs(recognise(frame.convert("RGB"), options, languages), where)
            except RuntimeError as exc:  # Tesseract failed or timed out on this page
                failed.append(f"page {number}: OCR: {exc}")
            except NoPack as exc:
                no_pack.append(str(exc) if frames == 1 else f"page {number}: {exc}")
    except Image.DecompressionBombError as exc:
        raise Skipped(Skip.TOO_LARGE, f"image: {exc}") from None
    except (OSError, ValueError, SyntaxError) as exc:
        raise Skipped(Skip.CORRUPT, f"image: {type(exc).__name__}: {exc}") from None
    unread = past_page_limit(range(read + 1, frames + 1), options)
    if not blocks and no_pack:
        raise Skipped(Skip.NEEDS_OCR, f"{kind} image: {'; '.join(no_pack)}")
    if not blocks:
        raise Skipped(
            Skip.EMPTY,
            f"{kind} image: no text recognised"
            + (f" ({'; '.join(failed[:1] + unread)})" if failed or unread else ""),
        )
    return Extracted(
        tuple(blocks),
        failed=tuple(no_pack + failed + unread),
        pages_failed=len(no_pack) + len(failed) + frames - read,
    )


def past_page_limit(pages: Sequence[int], options: ReadOptions) -> list[str]:
    """The line of `Extracted.failed` for the `pages` not recognised because they come
    after the first `ocr_max_pages` of a file; none when there are none."""
    if not pages:
        return []
    limit = options.ocr_max_pages
    return [
        f"{page_span(pages)}: not recognised: OCR stops after {limit} "
        f"page{'s' if limit != 1 else ''} a file"
    ]


@dataclass(frozen=True)
class ScannedPages:
    """What OCR made of a PDF's pages with no text layer. blocks: page -> its blocks at
    `Location(page=n)`, for the pages that gave text; notes: one line per reason some
    pages gave none, such as "pages 2–4: no text layer, and Tesseract is not installed";
    needs_ocr: some of them gave none for want of OCR (off, Tesseract or a chosen pack
    not installed, or no installed pack for a page's script)."""

    blocks: dict[int, list[Block]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    needs_ocr: bool = False


def ocr_pdf_pages(data: bytes, pages: Sequence[int], options: ReadOptions) -> ScannedPages:
    """Recognise the PDF pages numbered `pages` (1-based; the pages with no text layer;
    see `ScannedPages`). Only the first `ocr_max_pages` of them are recognised; the rest
    are a line of their own."""
    if not pages:
        return ScannedPages()
    try:
        languages = ocr_languages(options)
    except OcrUnavailable as exc:
        return ScannedPages(notes=[f"{page_span(pages)}: no text layer, and {exc}"], needs_ocr=True)
    unread = past_page_limit(list(pages)[options.ocr_max_pages :], options)
    pages = list(pages)[: options.ocr_max_pages]
    import pypdfium2 as pdfium

    found: dict[int, list[Block]] = {}
    reasons: dict[str, list[int]] = {}
    try:
        document = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        return ScannedPages(
            notes=[f"{page_span(pages)}: no text layer, and PDFium cannot open the file: {exc}"]
        )
    no_pack = False

    def settle(number: int, recognised: Future[str]) -> None:
        nonlocal no_pack
        try:
            blocks = paragraphs(recognised.result(), Location(page=number))
        except RuntimeError as exc:  # Tesseract failed or timed out on this page
            reasons.setdefault(f"OCR failed: {exc}", []).append(number)
            return
        except NoPack as exc:  # the page's script has no installed pack
            reasons.setdefault(f"no text layer, and {exc}", []).append(number)
            no_pack = True
            return
        if blocks:
            found[number] = blocks
        else:
            reasons.setdefault("no text layer, and OCR found no text", []).append(number)

    # Pages are rendered one at a time (PDFium is not thread-safe) and recognised side by
    # side, one Tesseract process each, at most `workers` pages (and their images) at once.
    workers = options.ocr_workers or os.cpu_count() or 1
    scale = options.ocr_dpi / _POINTS_PER_INCH
    pending: deque[tuple[int, Future[str]]] = deque()
    try:
        with ThreadPoolExecutor(workers, thread_name_prefix="attnswitch-ocr") as pool:
            for number in pages:
                try:
                    page = document[number - 1]
                    width, height = page.get_size()
                    if width * scale * height * scale > options.max_pixels:
                        reasons.setdefault(
                            f"too large to render at {options.ocr_dpi} dpi", []
                        ).append(number)
                        continue
                    image = page.render(scale=scale, grayscale=True).to_pil()
                except (RuntimeError, pdfium.PdfiumError) as exc:  # PDFium cannot render it
                    reasons.setdefault(f"OCR failed: {exc}", []).append(number)
                    continue
                pending.append((number, pool.submit(recognise, image, options, languages)))
                while len(pending) >= workers:
                    settle(*pending.popleft())
            while pending:
                settle(*pending.popleft())
    finally:
        document.close()
    notes = [f"{page_span(numbers)}: {why}" for why, numbers in reasons.items()] + unread
    return ScannedPages(found, notes, no_pack)


def textless(pages: int, scanned: ScannedPages) -> Skipped:
    """Why a PDF of `pages` pages, none with text, is skipped, given what `ocr_pdf_pages`
    made of them: it needs OCR (off or unavailable, or a page's script has no pack), or
    OCR found no text."""
    notes = scanned.notes
    if scanned.needs_ocr:
        return Skipped(Skip.NEEDS_OCR, "; ".join(notes))
    return Skipped(
        Skip.EMPTY,
        f"no extractable text in {pages} pages" + (f" ({'; '.join(notes)})" if notes else ""),
    )


def page_span(pages: Sequence[int]) -> str:
    """ "page 3", "pages 1–4, 7": page numbers as a person reads them."""
    numbers = sorted(set(pages))
    runs: list[str] = []
    start = prev = numbers[0]
    for n in numbers[1:] + [None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        runs.append(str(start) if start == prev else f"{start}–{prev}")
        if n is not None:
            start = prev = n
    return ("page " if len(numbers) == 1 else "pages ") + ", ".join(runs)
