"""OCR: the text of scanned pages and images, recognised by Tesseract.

- Images (`.png`, `.jpg`/`.jpeg`, `.tif`/`.tiff`, also known by content): opened with
  Pillow and recognised; a multi-page TIFF gives one `Location(page=n)` per frame. An
  image of more than `max_pixels` pixels is skipped as too large before it is decoded.
- PDF pages with no text layer: the PDF reader hands their numbers to
  `ocr_pdf_pages`, which renders each with pypdfium2 (PDFium, Chrome's PDF renderer) at
  `ocr_dpi` and recognises it, `ocr_workers` pages at a time (one Tesseract process
  each; 0: one per CPU).

Tesseract runs as its command-line program (`tesseract`, Debian's `tesseract-ocr` with
`tesseract-ocr-eng`), one thread per page, at most `ocr_timeout_s` per page.
Where OCR is off (`ReadOptions(ocr=False)`), or Tesseract or one of `ocr_languages` is
not installed, nothing is recognised and the pages say so: an image is skipped
(`Skip.NEEDS_OCR`) with the reason, and a PDF's pages are listed in `Extracted.failed`
(or the PDF is skipped when no page has text); never silently empty. The text
Tesseract gives is cut into paragraph blocks at its blank lines.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from attnswitch.pipeline.readers.blocks import Block, BlockKind, Extracted, Location, ReadOptions
from attnswitch.pipeline.readers.skip import Skip, Skipped

_POINTS_PER_INCH = 72
_LIST_TIMEOUT_S = 30


def ocr_unavailable(options: ReadOptions) -> str | None:
    """Why pages cannot be recognised under `options` ("OCR is off", "Tesseract is not
    installed", a missing language), or None when they can."""
    if not options.ocr:
        return "OCR is off"
    if shutil.which("tesseract") is None:
        return "Tesseract is not installed (Debian: tesseract-ocr)"
    try:
        listed = subprocess.run(["tesseract", "--list-langs"], capture_output=True,
                                timeout=_LIST_TIMEOUT_S, check=True, env=_tesseract_env())
    except (OSError, subprocess.SubprocessError) as exc:
        return f"Tesseract does not run: {type(exc).__name__}: {exc}"
    # The first line is a title ("List of available languages in ..."), then one a line.
    installed = {line.strip() for line in listed.stdout.decode(errors="replace").splitlines()[1:]}
    missing = [lang for lang in options.ocr_languages.split("+") if lang not in installed]
    if missing:
        return (f"Tesseract has no data for {'+'.join(missing)} "
                f"(Debian: tesseract-ocr-{missing[0]})")
    return None


def recognise(image, options: ReadOptions) -> str:
    """The text Tesseract reads in a Pillow image; `RuntimeError` when it fails or takes
    more than `ocr_timeout_s`. The image goes to the `tesseract` program as a PNG on its
    standard input."""
    png = io.BytesIO()
    image.save(png, format="PNG")
    try:
        done = subprocess.run(["tesseract", "stdin", "stdout", "-l", options.ocr_languages],
                              input=png.getvalue(), capture_output=True,
                              timeout=options.ocr_timeout_s, env=_tesseract_env())
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"Tesseract took more than {options.ocr_timeout_s:g} s") from None
    except OSError as exc:
        raise RuntimeError(f"Tesseract does not run: {exc}") from None
    if done.returncode != 0:
        lines = done.stderr.decode(errors="replace").strip().splitlines()
        raise RuntimeError(f"Tesseract failed ({done.returncode}): "
                           f"{lines[-1] if lines else 'no message'}")
    return done.stdout.decode("utf-8", "replace")


def _tesseract_env() -> dict[str, str]:
    # One thread per Tesseract: its OpenMP threads fight over a busy machine's cores (one
    # page took 21 s instead of 2.4 s on two loaded cores); pages run side by side in
    # processes instead, as Tesseract's documentation advises.
    return {**os.environ, "OMP_THREAD_LIMIT": "1"}


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
    the image is unreadable or too large, or no text is recognised. The size of every
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
                raise Skipped(Skip.TOO_LARGE, f"{kind}{where} of {width}x{height} pixels, "
                                              f"more than the limit {options.max_pixels}")
        image.seek(0)
    except UnidentifiedImageError:
        raise Skipped(Skip.CORRUPT, "image: not an image Pillow can read (broken, or "
                                    "another format under an image's name)") from None
    except Image.DecompressionBombError as exc:  # past Pillow's own limit, said as ours
        raise Skipped(Skip.TOO_LARGE, f"image: {exc}") from None
    except (OSError, ValueError, SyntaxError, EOFError) as exc:
        raise Skipped(Skip.CORRUPT, f"image: {type(exc).__name__}: {exc}") from None
    why = ocr_unavailable(options)
    if why is not None:
        raise Skipped(Skip.NEEDS_OCR, f"{kind} image: {why}")
    blocks: list[Block] = []
    failed: list[str] = []
    try:
        for number, frame in enumerate(ImageSequence.Iterator(image), start=1):
            if number > read:
                break
            where = Location(page=number) if frames > 1 else Location()
            try:
                blocks += paragraphs(recognise(frame.convert("RGB"), options), where)
            except RuntimeError as exc:  # Tesseract failed or timed out on this page
                failed.append(f"page {number}: OCR: {exc}")
    except Image.DecompressionBombError as exc:
        raise Skipped(Skip.TOO_LARGE, f"image: {exc}") from None
    except (OSError, ValueError, SyntaxError) as exc:
        raise Skipped(Skip.CORRUPT, f"image: {type(exc).__name__}: {exc}") from None
    unread = past_page_limit(range(read + 1, frames + 1), options)
    if not blocks:
        raise Skipped(Skip.EMPTY, f"{kind} image: no text recognised"
                      + (f" ({'; '.join(failed[:1] + unread)})" if failed or unread else ""))
    return Extracted(tuple(blocks), failed=tuple(failed + unread),
                     pages_failed=len(failed) + frames - read)


def past_page_limit(pages: Sequence[int], options: ReadOptions) -> list[str]:
    """The line of `Extracted.failed` for the `pages` not recognised because they come
    after the first `ocr_max_pages` of a file; none when there are none."""
    if not pages:
        return []
    limit = options.ocr_max_pages
    return [f"{page_span(pages)}: not recognised: OCR stops after {limit} "
            f"page{'s' if limit != 1 else ''} a file"]


def ocr_pdf_pages(data: bytes, pages: Sequence[int],
                  options: ReadOptions) -> tuple[dict[int, list[Block]], list[str]]:
    """Recognise the PDF pages numbered `pages` (1-based; the pages with no text layer):
    (page -> its blocks at `Location(page=n)`, one line per reason some pages gave
    none, such as "pages 2–4: no text layer, and Tesseract is not installed"). Only the
    first `ocr_max_pages` of them are recognised; the rest are a line of their own."""
    if not pages:
        return {}, []
    why = ocr_unavailable(options)
    if why is not None:
        return {}, [f"{page_span(pages)}: no text layer, and {why}"]
    unread = past_page_limit(list(pages)[options.ocr_max_pages:], options)
    pages = list(pages)[:options.ocr_max_pages]
    import pypdfium2 as pdfium

    found: dict[int, list[Block]] = {}
    reasons: dict[str, list[int]] = {}
    try:
        document = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        return {}, [f"{page_span(pages)}: no text layer, and PDFium cannot open the file: "
                    f"{exc}"]

    def settle(number: int, recognised: Future[str]) -> None:
        try:
            blocks = paragraphs(recognised.result(), Location(page=number))
        except RuntimeError as exc:  # Tesseract failed or timed out on this page
            reasons.setdefault(f"OCR failed: {exc}", []).append(number)
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
                        reasons.setdefault(f"too large to render at {options.ocr_dpi} dpi",
                                           []).append(number)
                        continue
                    image = page.render(scale=scale, grayscale=True).to_pil()
                except (RuntimeError, pdfium.PdfiumError) as exc:  # PDFium cannot render it
                    reasons.setdefault(f"OCR failed: {exc}", []).append(number)
                    continue
                pending.append((number, pool.submit(recognise, image, options)))
                while len(pending) >= workers:
                    settle(*pending.popleft())
            while pending:
                settle(*pending.popleft())
    finally:
        document.close()
    return found, [f"{page_span(numbers)}: {why}" for why, numbers in reasons.items()] + unread


def textless(pages: int, notes: Sequence[str], options: ReadOptions) -> Skipped:
    """Why a PDF of `pages` pages, none with text, is skipped, given the lines of
    `ocr_pdf_pages`: it needs OCR (off or unavailable), or OCR found no text."""
    if notes and ocr_unavailable(options) is not None:
        return Skipped(Skip.NEEDS_OCR, notes[0])
    return Skipped(Skip.EMPTY, f"no extractable text in {pages} pages"
                   + (f" ({'; '.join(notes)})" if notes else ""))


def page_span(pages: Sequence[int]) -> str:
    """"page 3", "pages 1–4, 7": page numbers as a person reads them."""
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
