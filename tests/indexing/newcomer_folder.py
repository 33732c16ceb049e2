"""A small folder built like the newcomer's drive of issue 53: pages of Debian's
python3-doc, bc's README (its text written here: bc is not installed on every machine)
and a PDF about DHCP (rendered here, one page of text, by `text_pdf`)."""

from __future__ import annotations

import shutil
import zlib
from pathlib import Path

PYTHON_LIBRARY = Path("/usr/share/doc/python3-doc/html/library")
# Pages near both queries' words (numbers and precision; networks and addresses).
PYTHON_PAGES = (
    "decimal.html",
    "fractions.html",
    "math.html",
    "cmath.html",
    "numbers.html",
    "ipaddress.html",
    "socketserver.html",
    "http.server.html",
)

BC_README = """\
This is GNU bc version 1.07.1.

bc is an arbitrary precision numeric processing language. Its syntax is similar to C,
but differs in many substantial areas. It supports interactive execution of statements.
bc is a utility included in the POSIX P1003.2/D11 draft standard.

dc is the desk calculator: a reverse-polish calculator which supports unlimited
precision arithmetic. It also allows you to define and call macros.

This version of bc was written to be a POSIX compliant bc processor with several
extensions to the draft standard. Options on the command line make the extensions
produce warnings or errors. The math library (-l) defines sine, cosine, arctangent,
natural logarithm, the exponential function and Bessel functions of integer order.

To build bc, run ./configure and then make; make install puts bc and dc in /usr/local/bin.
Report bugs to bug-bc@gnu.org.
"""

DHCP_TEXT = """\
DHCP: Dynamic Host Configuration Protocol

The Dynamic Host Configuration Protocol assigns each computer on a network its
configuration when it joins: an address, the subnet mask, the default gateway and the
name servers. No one has to type these settings into every machine by hand.

How a lease is obtained

A client that starts broadcasts a DISCOVER message. Each server that can serve it answers
with an OFFER. The client sends a REQUEST for one offer, and that server confirms with an
ACK. The address is leased for a limited time; the client renews the lease at half of it.

Running a server

The server keeps a pool of addresses for each subnet and a table of the leases it gave.
Fixed reservations tie one address to one hardware (MAC) address, for printers and servers.
A relay agent forwards the broadcasts from subnets that have no server of their own.
"""


def text_pdf(text: str, path: Path) -> Path:
    """`text` as a one-page PDF at `path` (Helvetica 10 pt, one line of text per line of
    `text`, its stream compressed), written byte by byte: no PDF library needed."""
    lines = []
    for line in text.splitlines():
        escaped = line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        lines.append(f"({escaped}) Tj T*")
    stream = zlib.compress(
        ("BT /F1 10 Tf 12 TL 50 780 Td\n" + "\n".join(lines) + "\nET").encode("latin-1")
    )
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        b"/Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    path.write_bytes(bytes(out))
    return path


def newcomer_folder(root: Path) -> Path:
    """`root` filled: `python/` with `PYTHON_PAGES`, `bc/README` and `network/dhcp.pdf`."""
    (root / "python").mkdir(parents=True)
    for name in PYTHON_PAGES:
        shutil.copy(PYTHON_LIBRARY / name, root / "python" / name)
    (root / "bc").mkdir()
    (root / "bc" / "README").write_text(BC_README)
    (root / "network").mkdir()
    text_pdf(DHCP_TEXT, root / "network" / "dhcp.pdf")
    return root
