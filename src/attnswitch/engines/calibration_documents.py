"""Chunks shaped like the documents an index holds, for calibrating static int8 quantisation.

Static int8 fixes each activation's scale from the ranges it takes on calibration inputs;
an input unlike any of them (a run of `=` under a reStructuredText heading, a shell prompt,
a JSON brace, a hex address) can reach values past those ranges, which int8 then clips. The
other calibration texts are prose (`autopick.calibration_texts`,
`retrieval_check.calibration_corpus`); these add the markup, code and symbols of technical
documents as the engine's chunker cuts them (headings with their underlines, code blocks,
tables, lists, logs, configuration), at lengths from a sentence to a full chunk.

The texts were written for this purpose (none is copied from a document) and are fixed, so
a calibration is deterministic; `quantize.CALIBRATION_REVISION` changes when they do.
"""

from __future__ import annotations

DOCUMENTS: tuple[str, ...] = (
    "Installing the server\n=====================\n\nThe server needs a database and a "
    "folder it can write to. Run the installer as the user that will own the data::\n\n"
    "   $ ./install.sh --prefix /opt/app --data /var/lib/app\n\n.. note::\n\n   The "
    "installer never overwrites an existing configuration file; it writes the new one "
    "beside it with a ``.new`` suffix.\n\nSee :ref:`upgrading` for the steps that follow "
    "a new release, and :doc:`configuration` for every setting.",
    "Loops and conditions\n--------------------\n\nThe :keyword:`while` statement repeats "
    "its body as long as a condition holds; :keyword:`continue` skips to the next "
    "iteration and :keyword:`break` leaves the innermost loop at once::\n\n   >>> n = 0\n"
    "   >>> while n < 3:\n   ...     n += 1\n   ...     print(n, end=' ')\n   1 2 3\n\n"
    "An :keyword:`else` clause after a loop runs when the loop ends without a break.",
    "*************************\nAdvanced configuration\n*************************\n\n"
    "Most deployments never change these values. Each one is read at start, and a change "
    "takes effect after a restart.\n\n``max_connections`` (integer, default ``100``)\n"
    "   How many clients may be connected at once.\n\n``work_mem`` (size, default "
    "``4MB``)\n   Memory for one sort or hash operation before it spills to disk.",
    "# Quick start\n\nInstall the package and index a folder of documents:\n\n```bash\n"
    "pip install example-indexer\nexample-indexer run ./docs --db ./index\n```\n\n"
    'Then search it:\n\n```bash\nexample-indexer search "how do I rotate the logs" -k 5\n'
    "```\n\n## Options\n\n- `--db PATH`: where the index lives (created if missing)\n"
    "- `--jobs N`: documents read in parallel (default: one per core)\n- `--json`: "
    "machine-readable output\n\nSee [the full reference](https://example.org/docs/cli.html)"
    " for every flag.",
    "| Method | Path | Description |\n|--------|------|-------------|\n| GET | "
    "/v1/items | List items, newest first |\n| GET | /v1/items/{id} | One item by id |\n"
    "| POST | /v1/items | Create an item; 201 with its id |\n| DELETE | /v1/items/{id} | "
    "Remove an item; 404 when it does not exist |\n\nEvery response is JSON. Errors carry "
    "a `code` and a `message`.",
    'def retry(call, attempts=3, delay=0.5):\n    """Call `call()` until it succeeds, '
    "at most `attempts` times.\n\n    Waits `delay` seconds after the first failure and "
    "twice as long after each\n    next one. The last exception is raised again.\n\n"
    '    >>> retry(lambda: 42)\n    42\n    """\n    for attempt in range(attempts):\n'
    "        try:\n            return call()\n        except OSError:\n            if "
    "attempt == attempts - 1:\n                raise\n            time.sleep(delay * 2 ** "
    "attempt)",
    "CREATE TABLE orders (\n    id BIGSERIAL PRIMARY KEY,\n    customer_id BIGINT NOT NULL "
    "REFERENCES customers(id),\n    placed_at TIMESTAMPTZ NOT NULL DEFAULT now(),\n"
    "    total NUMERIC(12, 2) CHECK (total >= 0)\n);\n\nCREATE INDEX orders_customer_idx ON "
    "orders (customer_id, placed_at DESC);\n\n-- the ten latest orders of one customer\n"
    "SELECT id, total FROM orders WHERE customer_id = $1 ORDER BY placed_at DESC LIMIT 10;",
    '{\n  "name": "search-service",\n  "version": "2.4.1",\n  "listen": '
    '{"host": "0.0.0.0", "port": 8080},\n  "limits": {"max_body_bytes": 1048576, '
    '"requests_per_minute": 600},\n  "index": {"path": "/srv/index", "dimension": '
    '384, "metric": "cosine"},\n  "log": {"level": "info", "format": "json"}\n}',
    "services:\n  db:\n    image: postgres:16\n    environment:\n      POSTGRES_PASSWORD: "
    "change-me\n    volumes:\n      - db-data:/var/lib/postgresql/data\n  app:\n    build: "
    '.\n    depends_on: [db]\n    ports:\n      - "8080:8080"\n    healthcheck:\n      '
    'test: ["CMD", "curl", "-f", "http://localhost:8080/healthz"]\n      interval: '
    "10s\nvolumes:\n  db-data: {}",
    "2026-03-14T09:26:53.589Z INFO  worker-3 job 7f3a9c started: 1,204 documents queued\n"
    "2026-03-14T09:27:01.002Z WARN  worker-3 skipped docs/old/report.doc: unsupported "
    "format\n2026-03-14T09:27:44.117Z ERROR worker-1 connection to 10.0.4.17:5432 lost "
    "(timeout after 30000 ms); retrying in 2 s\nTraceback (most recent call last):\n  File "
    '"app/store.py", line 212, in write\n    cursor.execute(sql, params)\n'
    "psycopg.OperationalError: server closed the connection unexpectedly\n"
    "2026-03-14T09:27:46.530Z INFO  worker-1 reconnected; resuming at document 388",
    "NAME\n       sync-tool - copy files between folders, only what changed\n\nSYNOPSIS\n"
    "       sync-tool [-n] [-v] [--exclude PATTERN]... SOURCE DEST\n\nOPTIONS\n       -n, "
    "--dry-run\n              Show what would be copied; change nothing.\n\n       -v, "
    "--verbose\n              Print each file as it is copied.\n\n       --exclude PATTERN\n"
    "              Skip paths matching PATTERN (a shell glob); may be repeated.\n\n"
    "EXIT STATUS\n       0 on success, 1 when some files could not be copied, 2 on bad "
    "arguments.",
    "Changelog\n=========\n\n3.2.0 (2026-05-02)\n------------------\n\n* Added: "
    "``--since DATE`` limits a run to files changed after DATE.\n* Fixed: a file renamed "
    "during a run is no longer read twice (#1841).\n* Changed: the default batch size is "
    "now 64 (was 32); memory use rises by about 12%.\n\n3.1.4 (2026-03-20)\n"
    "------------------\n\n* Fixed: a crash on empty input files (#1799).",
    "#include <stdio.h>\n#include <stdlib.h>\n\n/* Read numbers from stdin, one per line, "
    "and print their sum. */\nint main(void) {\n    char line[256];\n    long long sum = 0;"
    "\n    while (fgets(line, sizeof line, stdin) != NULL) {\n        sum += strtoll(line, "
    'NULL, 10);\n    }\n    printf("%lld\\n", sum);\n    return EXIT_SUCCESS;\n}',
    "Frequently asked questions\n\nWhy does the first search take longer than the next "
    "ones? The model is loaded and compiled for this processor the first time; later "
    "searches reuse it. Can I index documents in several languages? The default model was "
    "trained on English text; other languages are indexed, but their results are weaker. "
    "How large can a folder be? Millions of chunks fit on one machine; the index grows by "
    "about two kilobytes per chunk.",
    "Results on the test set (mean of five runs, standard deviation in brackets):\n\n"
    "model        accuracy     latency (ms)   memory (MiB)\nbaseline     0.812 (0.004)   "
    "14.2 (0.3)     412\n+ caching    0.812 (0.004)    9.8 (0.2)     436\n+ int8       "
    "0.807 (0.005)    6.1 (0.2)     188\n\nThe int8 model loses 0.5 points of accuracy and "
    "runs 2.3x faster than the baseline.",
    'THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, '
    "INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A "
    "PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR COPYRIGHT "
    "HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER LIABILITY.",
    '<table class="params">\n<tr><th>Parameter</th><th>Type</th><th>Default</th></tr>\n'
    "<tr><td><code>timeout</code></td><td>float</td><td>30.0</td></tr>\n<tr><td><code>"
    "retries</code></td><td>int</td><td>3</td></tr>\n</table>\n<p>Values outside the "
    "allowed range raise <code>ValueError</code>.</p>",
    "os.path.join(path, *paths)\n    Join one or more path segments. The result is the "
    "concatenation of path and each member of *paths, with exactly one directory separator "
    "following each non-empty part except the last.\n\nos.path.splitext(path)\n    Split "
    "the pathname path into a pair (root, ext) such that root + ext == path.\n\n"
    "Availability: Unix, Windows.",
    "The variance of a sample x_1, ..., x_n is s^2 = (1 / (n - 1)) * sum_i (x_i - m)^2, "
    "where m is the sample mean. For n = 5 readings of 2.1, 2.4, 1.9, 2.2 and 2.4 volts, m = "
    "2.2 V and s^2 = 0.045 V^2, so s = 0.21 V. A 95% interval for the mean is m +/- 2.776 * "
    "s / sqrt(5), about 2.2 +/- 0.26 V.",
    "Step 1. Open Settings > Network > Proxy.\nStep 2. Set the address to proxy.example.org "
    'and the port to 3128.\nStep 3. Under "No proxy for", add localhost, 127.0.0.1 and '
    "*.internal.example.org.\nStep 4. Click Apply, then restart the browser.\n\nIf pages "
    "still fail to load, run `curl -v https://example.org` and check the line that starts "
    "with `* Connected to`.",
    "-----BEGIN CERTIFICATE REQUEST-----\nMIICvDCCAaQCAQAwdzELMAkGA1UEBhMCVVMxDTALBgNVBAgMBFV0"
    "YWgxDzANBgNV\n-----END CERTIFICATE REQUEST-----\n\nThe request above is base64 text; "
    "send it to the certificate authority. Its SHA-256 fingerprint is 3f:a9:0c:71:be:22:"
    "d4:5e, and the key it holds is 2048-bit RSA.",
    "Merge pull request #2210 from feature/streaming-reader\n\ncommit 9b1e47f0c2d3a8e6"
    "\nAuthor: build-bot <bot@example.org>\nDate:   Tue Apr 7 16:02:11 2026 +0000\n\n"
    "    reader: stream large PDF files page by page\n\n    Memory stays under 200 MiB for "
    "a 2 GiB file (was 3.1 GiB).\n\n diff --git a/reader/pdf.py b/reader/pdf.py\n@@ -88,7 "
    "+88,9 @@ def pages(path):\n-    data = path.read_bytes()\n+    with path.open('rb') as f:",
    "Chapter 4\n\nTHE HARBOUR\n\nBy the time the ferry reached the harbour the fog had "
    "lifted, and the town lay bright along the water: white houses, a church tower, boats "
    "drawn up on the shingle. She counted the windows of the inn twice before she was sure "
    "which one had been hers, eleven years before.",
    "Warning\n-------\n\nNever run the migration twice on the same database. The second run "
    "finds the new columns already present and stops with::\n\n    ERROR:  column "
    '"created_at" of relation "events" already exists\n\nRestore the backup taken '
    "before the first run, or mark the migration as applied with ``migrate --fake 0042``.",
)

__all__ = ["DOCUMENTS"]
