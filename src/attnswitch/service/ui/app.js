// The page of `attnswitch serve` (docs/service.md, "The page"): search, the index, jobs and
// the hardware report over the server's JSON API. Plain JavaScript, no build step, no
// library. Every text from the server is put in the page as text (text nodes and
// textContent), never parsed as HTML. The API key, when the server wants one, is kept in
// this tab's sessionStorage and sent as a bearer header.
"use strict";

(() => {
  const KEY_STORAGE = "attnswitch.key";
  const SEARCH_DEBOUNCE_MS = 200;
  const JOB_POLL_MS = 700;
  const METRICS_POLL_MS = 2000;
  const CHART_SAMPLES = 150; // 5 minutes at 2 s
  const PAGES = ["search", "index", "jobs", "hardware"];

  const $ = (id) => document.getElementById(id);
  const state = {
    server: null, page: null, searchSeq: 0, searchTimer: 0, jobTimer: 0,
    metricsTimer: 0, samples: [], skippedOffset: 0, skippedTimer: 0,
  };

  // ---- helpers ------------------------------------------------------------------------

  /** An element with attributes and children (strings become text nodes). */
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") node.className = v;
      else node.setAttribute(k, v === true ? "" : String(v));
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function say(id, text, cls) {
    const node = $(id);
    node.textContent = text || "";
    node.className = cls || "";
  }

  const fmtInt = (n) => (n === null || n === undefined ? "-" : Number(n).toLocaleString("en"));
  const fmtNum = (n, digits) => (n === null || n === undefined ? "-" : Number(n).toFixed(digits));

  function fmtBytes(n) {
    if (n === null || n === undefined) return "-";
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
    return `${i ? n.toFixed(1) : n} ${units[i]}`;
  }

  function fmtSeconds(s) {
    if (s === null || s === undefined || !isFinite(s)) return "-";
    if (s < 60) return `${Math.round(s)} s`;
    const m = Math.floor(s / 60);
    return m < 60 ? `${m} min ${Math.round(s % 60)} s` : `${Math.floor(m / 60)} h ${m % 60} min`;
  }

  /** The index's vectors (`coverage` of /v1/index): full ones, and while the full pass is not
   * done, how many chunks are found by their quick vectors meanwhile. */
  function coverageText(c) {
    if (!c || !c.chunks) return "-";
    const pct = (f) => `${Math.floor(f * 100)}%`;
    if (c.full >= 1) return "every chunk has its full vector";
    return `${pct(c.full)} with full vectors, ${pct(c.quick)} with quick vectors (the full pass is filling them in)`;
  }

  const fmtTime = (t) => (t ? new Date(t * 1000).toLocaleString("en-GB") : "-");

  /** The API's answer: {ok, status, body, retryAfter}; a 401 shows the key form.
   * `options.json` is sent as the body of a POST; `options.method` sets another method. */
  async function api(path, options) {
    const headers = { Accept: "application/json" };
    const key = sessionStorage.getItem(KEY_STORAGE);
    if (key) headers.Authorization = `Bearer ${key}`;
    const init = { method: (options && options.method) || "GET", headers, cache: "no-store" };
    if (options && options.json !== undefined) {
      init.method = "POST";
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(options.json);
    }
    let response;
    try {
      response = await fetch(path, init);
    } catch (err) {
      return { ok: false, status: 0, body: null, message: "the server cannot be reached" };
    }
    let body = null;
    try { body = await response.json(); } catch (err) { body = null; }
    const message = body && body.error ? body.error.message : `HTTP ${response.status}`;
    const answer = {
      ok: response.ok, status: response.status, body, message,
      code: body && body.error ? body.error.code : null,
      retryAfter: response.headers.get("Retry-After"),
    };
    if (response.status === 401 && path !== "/v1/server") showKeyForm("The key was refused; give it again.");
    return answer;
  }

  /** Open a hit's original file at its place (its `uri`: `GET /v1/chunks/{id}/file`, a
   * mail attachment alone there, `#page=N` for a PDF's page), with the key this tab holds:
   * fetched as a blob and opened in a new tab (PDF, images, text; the blob's address
   * keeps the page) or saved under its name. A link could not carry the bearer key. */
  async function openFile(hit, button) {
    const headers = {};
    const key = sessionStorage.getItem(KEY_STORAGE);
    if (key) headers.Authorization = `Bearer ${key}`;
    const route = `/v1/chunks/${encodeURIComponent(hit.chunk_id)}/file`;
    const uri = typeof hit.uri === "string" && hit.uri.startsWith(`${route}#`) ? hit.uri : route;
    const place = uri.slice(route.length);  // "#page=N" or ""
    let response;
    try {
      response = await fetch(route, { headers, cache: "no-store" });
    } catch (err) {
      say("search-status", "The server cannot be reached.", "bad");
      return;
    }
    if (!response.ok) {
      let message = `HTTP ${response.status}`;
      try { message = (await response.json()).error.message; } catch (err) { /* not JSON */ }
      say("search-status", `The file cannot be opened: ${message}`, "bad");
      return;
    }
    const url = URL.createObjectURL(await response.blob());
    const disposition = response.headers.get("Content-Disposition") || "";
    const inline = disposition.startsWith("inline");
    const link = el("a", { href: inline ? url + place : url, rel: "noopener", target: "_blank" });
    if (!inline) link.setAttribute("download", fileName(disposition) || hit.path.split("/").pop());
    document.body.append(link);
    link.click();
    link.remove();
    button.dataset.opened = "true";
    setTimeout(() => URL.revokeObjectURL(url), 60_000);
  }

  /** The file name a `Content-Disposition` value gives (`filename*=utf-8''...` or
   * `filename="..."`, as the server writes them), "" for none. */
  function fileName(disposition) {
    const encoded = /filename\*=utf-8''([^;]+)/i.exec(disposition);
    if (encoded) {
      try { return decodeURIComponent(encoded[1]); } catch (err) { return ""; }
    }
    const plain = /filename="([^"]*)"/.exec(disposition);
    return plain ? plain[1] : "";
  }

  // ---- start, key and navigation ------------------------------------------------------

  async function boot() {
    const answer = await api("/v1/server");
    if (answer.status === 401) {
      showKeyForm(sessionStorage.getItem(KEY_STORAGE) ? "That key was not accepted." : "");
      return;
    }
    if (answer.status === 503) {
      say("notice", `The server is not ready yet (${answer.message}); trying again…`);
      setTimeout(boot, 1000);
      return;
    }
    if (!answer.ok) {
      say("notice", `The server answered: ${answer.message}`, "bad");
      return;
    }
    state.server = answer.body;
    $("page-key").hidden = true;
    $("nav").hidden = false;
    document.querySelector('nav a[data-page="jobs"]').hidden = !state.server.jobs;
    say("serving", `${state.server.model} on ${state.server.engine}, ${state.server.precision}`, "muted");
    say("notice", "");
    route();
  }

  function showKeyForm(message) {
    stopTimers();
    for (const page of PAGES) $(`page-${page}`).hidden = true;
    $("nav").hidden = true;
    say("notice", "");
    $("page-key").hidden = false;
    say("key-status", message || "", message ? "bad" : "");
    $("key").focus();
  }

  $("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(KEY_STORAGE, $("key").value.trim());
    $("key").value = "";
    say("key-status", "Checking the key…");
    boot();
  });

  function stopTimers() {
    clearTimeout(state.jobTimer);
    clearTimeout(state.metricsTimer);
  }

  function currentPage() {
    const page = new URLSearchParams(location.search).get("page") || "search";
    if (page === "jobs" && !(state.server && state.server.jobs)) return "search";
    return PAGES.includes(page) ? page : "search";
  }

  function route() {
    stopTimers();
    const page = currentPage();
    state.page = page;
    for (const name of PAGES) $(`page-${name}`).hidden = name !== page;
    for (const link of document.querySelectorAll("nav a")) {
      if (link.dataset.page === page) link.setAttribute("aria-current", "page");
      else link.removeAttribute("aria-current");
    }
    document.title = `attnswitch: ${page}`;
    ({ search: showSearch, index: showIndex, jobs: showJobs, hardware: showHardware })[page]();
  }

  for (const link of document.querySelectorAll("nav a")) {
    link.addEventListener("click", (event) => {
      event.preventDefault();
      history.pushState(null, "", link.getAttribute("href"));
      route();
      $("main").focus();
    });
  }
  window.addEventListener("popstate", () => { if (state.server) route(); });

  // ---- search -------------------------------------------------------------------------

  function showSearch() {
    const params = new URLSearchParams(location.search);
    const mode = params.get("mode");
    $("q").value = params.get("q") || "";
    for (const [id, field] of FILTERS) $(id).value = params.get(field) || "";
    if (FILTERS.some(([, field]) => params.get(field))) $("filters").open = true;
    const known = MODE_RADIOS.some((radio) => radio.value === mode);
    for (const radio of MODE_RADIOS) radio.checked = known ? radio.value === mode : radio.defaultChecked;
    $("q").focus();
    runSearch();
  }

  // The mode radios and the filter inputs, as the server wrote them into the page
  // (service/page.py, from the one definition of a search): a radio's value is the mode's
  // name, the default one is checked in the HTML, `data-fused` marks a mode that ranks by
  // meaning and words; an input's `data-filter` is its field of /v1/search's `filter` and
  // its URL parameter, `data-list` says it takes a comma-separated list (dates: ISO days).
  const MODE_RADIOS = Array.from(document.querySelectorAll('input[name="mode"]'));
  const searchMode = () => MODE_RADIOS.find((radio) => radio.checked).value;
  const defaultMode = () => MODE_RADIOS.find((radio) => radio.defaultChecked).value;
  const isFused = (mode) => MODE_RADIOS.some((radio) => radio.value === mode && "fused" in radio.dataset);
  const FILTERS = Array.from(document.querySelectorAll("[data-filter]"),
    (input) => [input.id, input.dataset.filter, "list" in input.dataset]);

  function searchFilter() {
    const filter = {};
    for (const [id, field, list] of FILTERS) {
      const value = $(id).value.trim();
      if (!value) continue;
      filter[field] = list ? value.split(",").map((v) => v.trim()).filter(Boolean) : value;
    }
    return Object.keys(filter).length ? filter : null;
  }

  function keepSearchInUrl(query, mode) {
    const params = new URLSearchParams();
    if (query) params.set("q", query);
    if (mode !== defaultMode()) params.set("mode", mode);
    for (const [id, field] of FILTERS) if ($(id).value.trim()) params.set(field, $(id).value.trim());
    const search = params.toString();
    history.replaceState(null, "", search ? `?${search}` : location.pathname);
    // the Search tab brings this search back after a visit to another page
    document.querySelector('nav a[data-page="search"]').setAttribute("href", search ? `?${search}` : "?page=search");
  }

  function scheduleSearch() {
    clearTimeout(state.searchTimer);
    state.searchTimer = setTimeout(runSearch, SEARCH_DEBOUNCE_MS);
  }

  $("q").addEventListener("input", scheduleSearch);
  for (const radio of MODE_RADIOS) radio.addEventListener("change", runSearch);
  const PER_DOCUMENT = document.getElementById("per-document");
  if (PER_DOCUMENT) PER_DOCUMENT.addEventListener("change", runSearch);
  for (const [id] of FILTERS) $(id).addEventListener($(id).type === "date" ? "change" : "input", scheduleSearch);
  $("search-form").addEventListener("submit", (event) => {
    event.preventDefault();
    clearTimeout(state.searchTimer);
    runSearch();
  });

  async function runSearch() {
    clearTimeout(state.searchTimer);
    const query = $("q").value;
    const mode = searchMode();
    keepSearchInUrl(query.trim() ? query : "", mode);
    const seq = ++state.searchSeq;
    closeContext(false);
    if (!query.trim()) {
      $("hits").replaceChildren();
      say("search-status", "Type a question or some words to search the index.");
      return;
    }
    say("search-status", "Searching…");
    const filter = searchFilter();
    const body = { query, mode, k: 10 };
    if (filter) body.filter = filter;
    if (PER_DOCUMENT && PER_DOCUMENT.checked) body.group = "document";
    const answer = await api("/v1/search", { json: body });
    if (seq !== state.searchSeq) return; // a newer search was sent meanwhile
    $("hits").replaceChildren();
    if (!answer.ok) {
      say("search-status", searchProblem(answer), "bad");
      return;
    }
    const hits = answer.body.data;
    if (!hits.length) {
      say("search-status", answer.body.note ? `No result: ${answer.body.note}.`
        : `No result for “${query.trim()}” in ${mode} mode.`);
      return;
    }
    const filling = answer.body.coverage_note ? ` Note: ${answer.body.coverage_note}.` : "";
    say("search-status", `${hits.length} result${hits.length > 1 ? "s" : ""} for “${query.trim()}” (${mode}).${filling}`);
    $("hits").replaceChildren(...hits.map((hit) => renderHit(hit, query, mode)));
  }

  function searchProblem(answer) {
    if (answer.code === "index_empty") return `Nothing is indexed yet, so there is nothing to search. (${answer.message})`;
    if (answer.status === 429) return `The server is busy; try again in ${answer.retryAfter || "a few"} seconds.`;
    if (answer.status === 503) return `The index cannot be searched right now: ${answer.message}`;
    if (answer.status === 409) return `The index cannot be searched with this server's model: ${answer.message}`;
    if (answer.status === 0) return "The server cannot be reached.";
    return `The search failed: ${answer.message}`;
  }

  /** A folder-relative path: the hit's root (already relative to the jobs root) and path. */
  const shownPath = (root, path) => (root && root !== "." ? `${root}/${path}` : path);

  function renderHit(hit, query, mode) {
    const where = [];
    if (Array.isArray(hit.heading_path) && hit.heading_path.length) where.push(hit.heading_path.join(" › "));
    if (hit.location !== undefined && hit.location !== null) {
      // formats without places give {}: no empty part (no dangling " · ")
      const place = typeof hit.location === "object" ? Object.entries(hit.location).map(([k, v]) => `${k} ${v}`).join(", ") : String(hit.location);
      if (place) where.push(place);
    }
    const article = el("article", { class: "hit", tabindex: "0", "data-chunk": hit.chunk_id, "aria-label": `${hit.rank}. ${shownPath(hit.root, hit.path)}` },
      el("header", {},
        el("span", { class: "path" }, shownPath(hit.root, hit.path)),
        el("span", { class: "score" }, `score ${fmtNum(hit.score, 4)} · ${mode}`)),
      isFused(mode) ? el("p", { class: "where found" }, foundBy(hit)) : null,
      where.length ? el("p", { class: "where" }, where.join(" · ")) : null,
      el("p", { class: "text" }, marked(hit.snippet, hit.highlights)),
      hit.more_in_document ? el("p", { class: "where more" },
        `${hit.more_in_document} more passage${hit.more_in_document > 1 ? "s" : ""} in this document`) : null,
      Array.isArray(hit.also_at) && hit.also_at.length ? el("p", { class: "where also" },
        `also at: ${hit.also_at.map((a) => shownPath(a.root, a.path)).join(", ")}`) : null,
      el("div", { class: "row" },
        el("button", { type: "button", class: "open" }, "Show in context"),
        el("button", { type: "button", class: "file" }, "Open file")));
    article.querySelector("button.open").addEventListener("click", () => openContext(hit, query, article));
    const fileButton = article.querySelector("button.file");
    fileButton.addEventListener("click", () => openFile(hit, fileButton));
    return el("li", {}, article);
  }

  /** Which lists of a hybrid search held the hit, and at which rank. */
  function foundBy(hit) {
    const parts = [];
    if (hit.dense_rank) parts.push(`by meaning (#${hit.dense_rank})`);
    if (hit.keyword_rank) parts.push(`by its words (#${hit.keyword_rank})`);
    return parts.length ? `found ${parts.join(" and ")}` : "";
  }

  /** `text` as nodes, each of the query's words (2 characters or more) in a <mark>. */
  /** `text` as text nodes, with each [start, end] of `spans` (code-point offsets, as the
   * server counts them) in a <mark>; never parsed as HTML. */
  function marked(text, spans) {
    const points = Array.from(text || "");
    const out = [];
    let at = 0;
    for (const [start, end] of [...(spans || [])].sort((a, b) => a[0] - b[0])) {
      if (start < at || end > points.length || end <= start) continue;
      out.push(document.createTextNode(points.slice(at, start).join("")));
      out.push(el("mark", {}, points.slice(start, end).join("")));
      at = end;
    }
    out.push(document.createTextNode(points.slice(at).join("")));
    return out;
  }

  function highlight(text, query) {
    const words = [...new Set((query.match(/[\p{L}\p{N}_]{2,}/gu) || []).map((w) => w.toLowerCase()))];
    if (!words.length) return [document.createTextNode(text)];
    words.sort((a, b) => b.length - a.length);
    // whole words only: "in" is not marked inside "indexing"
    const alternatives = words.map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|");
    const pattern = new RegExp(`(?<![\\p{L}\\p{N}_])(${alternatives})(?![\\p{L}\\p{N}_])`, "giu");
    return text.split(pattern).map((part, i) => (i % 2 ? el("mark", {}, part) : document.createTextNode(part)));
  }

  $("hits").addEventListener("keydown", (event) => {
    const hits = [...document.querySelectorAll("#hits .hit")];
    const at = hits.indexOf(document.activeElement);
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      event.preventDefault();
      const next = at + (event.key === "ArrowDown" ? 1 : -1);
      if (next < 0) $("q").focus();
      else if (next < hits.length) hits[next].focus();
    } else if (event.key === "Enter" && at >= 0) {
      event.preventDefault();
      hits[at].querySelector("button.open").click();
    } else if (event.key === "Escape") {
      $("q").focus();
    }
  });

  $("q").addEventListener("keydown", (event) => {
    if (event.key === "ArrowDown") {
      const first = document.querySelector("#hits .hit");
      if (first) { event.preventDefault(); first.focus(); }
    }
  });

  async function openContext(hit, query, from) {
    const answer = await api(`/v1/chunks/${encodeURIComponent(hit.chunk_id)}/context?around=2`);
    if (!answer.ok) {
      say("search-status", `The chunk's context cannot be shown: ${answer.message}`, "bad");
      return;
    }
    const ctx = answer.body;
    state.contextFrom = from;
    $("context-title").textContent = `${shownPath(ctx.root, ctx.path)}: chunk ${ctx.ordinal + 1} of ${ctx.chunks_in_document}`;
    $("context-chunks").replaceChildren(...ctx.data.map((chunk) => el("li", {
      "aria-current": chunk.chunk_id === ctx.chunk_id ? "true" : null, "data-chunk": chunk.chunk_id },
    el("p", { class: "where" }, `chunk ${chunk.ordinal + 1}, characters ${chunk.start} to ${chunk.end}`),
    el("p", { class: "text" }, chunk.chunk_id === ctx.chunk_id ? highlight(chunk.text, query) : chunk.text))));
    $("context").hidden = false;
    $("context-title").focus();
  }

  function closeContext(refocus) {
    $("context").hidden = true;
    if (refocus && state.contextFrom && document.body.contains(state.contextFrom)) state.contextFrom.focus();
  }

  $("context-close").addEventListener("click", () => closeContext(true));
  $("context").addEventListener("keydown", (event) => { if (event.key === "Escape") closeContext(true); });

  // ---- index --------------------------------------------------------------------------

  /** A figure of a <dl class="figures">; a long value takes the whole row. */
  function figure(term, value) {
    return el("div", { class: String(value).length > 40 ? "wide" : null }, el("dt", {}, term), el("dd", {}, value));
  }

  async function showIndex() {
    say("index-status", "Reading the index…");
    const answer = await api("/v1/index");
    if (!answer.ok) {
      say("index-status", `The index cannot be read: ${answer.message}`, "bad");
      return;
    }
    const ix = answer.body;
    say("index-status", ix.documents ? "" : "Nothing is indexed yet.");
    const m = ix.model || {};
    // a reader's /v1/index has no skipped files nor runs (admin views): hidden
    const admin = state.server.role === "admin";
    $("index-admin").hidden = !admin;
    const reasons = Object.entries(ix.skipped_by_reason || {}).map(([k, n]) => `${k} (${n})`).join(", ");
    $("index-figures").replaceChildren(
      figure("Documents", fmtInt(ix.documents)),
      figure("Chunks", fmtInt(ix.chunks)),
      figure("Vectors", coverageText(ix.coverage)),
      figure("Tokens", fmtInt(ix.tokens)),
      figure("Size of the documents", fmtBytes(ix.bytes)),
      figure("Model", m.name ? `${m.name} (${m.fingerprint}, dimension ${m.dim})` : "-"),
      figure("Precision", m.precision || "-"),
      figure("Engine", m.engine || "-"),
      figure("Chunking", chunkingText(m)),
      figure("Folders", ix.roots.join(", ") || "-"),
      ...(admin ? [figure("Skipped files", ix.skipped ? `${fmtInt(ix.skipped)}: ${reasons}` : "none")] : []));
    if (!admin) return;
    $("runs").tBodies[0].replaceChildren(...ix.runs.map((r) => el("tr", {},
      el("td", {}, `#${r.id}`), el("td", { class: r.status === "failed" ? "bad" : null }, r.status),
      el("td", {}, r.root || "-"), el("td", {}, fmtTime(r.started_at)), el("td", {}, fmtInt(r.files)),
      el("td", {}, ["new", "changed", "unchanged", "deleted", "skipped"].map((k) => fmtInt(r[k])).join(" / ")),
      el("td", {}, fmtInt(r.chunks_encoded)), el("td", {}, fmtNum(r.wall_s, 1)), el("td", {}, fmtNum(r.chunks_per_s, 1)))));
    state.skippedOffset = 0;
    loadSkipped(false);
  }

  // How the index cuts its documents (/v1/index's model): "blocks of up to 254 tokens
  // (sections, paragraphs, sentences; no overlap)", or windows with their overlap.
  function chunkingText(m) {
    if (!m.max_tokens) return "-";
    const headings = m.embed_headings ? ", heading path embedded" : "";
    if (m.chunking === "windows") {
      return `windows of ${m.max_tokens} tokens, overlap ${m.overlap}${headings}`;
    }
    return `blocks of up to ${m.max_tokens} tokens (sections, paragraphs, sentences; no overlap)${headings}`;
  }

  async function loadSkipped(more) {
    const match = $("skipped-filter").value;
    const offset = more ? state.skippedOffset : 0;
    const answer = await api(`/v1/index/skipped?match=${encodeURIComponent(match)}&offset=${offset}&limit=50`);
    if (!answer.ok) {
      say("skipped-status", `The skipped files cannot be read: ${answer.message}`, "bad");
      return;
    }
    const rows = answer.body.data.map((f) => el("tr", {}, el("td", {}, f.root), el("td", {}, f.path), el("td", {}, f.reason)));
    const body = $("skipped").tBodies[0];
    if (more) body.append(...rows); else body.replaceChildren(...rows);
    state.skippedOffset = offset + rows.length;
    const total = answer.body.total;
    say("skipped-status", total ? `${fmtInt(total)} skipped file${total > 1 ? "s" : ""}${match ? ` matching “${match}”` : ""}; ${fmtInt(state.skippedOffset)} shown.`
      : (match ? `No skipped file matches “${match}”.` : "No file was skipped."));
    $("skipped-more").hidden = state.skippedOffset >= total;
  }

  $("skipped-filter").addEventListener("input", () => {
    clearTimeout(state.skippedTimer);
    state.skippedTimer = setTimeout(() => loadSkipped(false), SEARCH_DEBOUNCE_MS);
  });
  $("skipped-more").addEventListener("click", () => loadSkipped(true));

  // ---- jobs ---------------------------------------------------------------------------

  function showJobs() {
    $("job-path").focus();
    pollJobs();
  }

  $("job-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const path = $("job-path").value;
    say("job-status", `Starting a job on ${path}…`);
    const answer = await api("/v1/jobs", { json: { path } });
    if (!answer.ok) {
      say("job-status", `The job was not started: ${answer.message}`, "bad");
      return;
    }
    say("job-status", `Job ${answer.body.id} started on ${answer.body.path}.`);
    pollJobs();
  });

  function jobRates(job) {
    const p = job.progress || {};
    if (job.summary) return { rate: job.summary.chunks_per_s, eta: job.status === "running" ? null : 0 };
    if (!job.started_at) return { rate: null, eta: null };
    const elapsed = Math.max(Date.now() / 1000 - job.started_at, 1e-3);
    const rate = p.chunks ? p.chunks / elapsed : null;
    const done = p.bytes_done || 0;
    const eta = done > 0 && p.bytes_total ? (p.bytes_total - done) * elapsed / done : null;
    return { rate, eta };
  }

  // "interrupted": stopped by a server shutdown, resumed by the next start; "cancelled":
  // stopped by a client, never resumed
  const JOB_WORDS = { completed: "finished", interrupted: "interrupted (resumed at the next start)" };
  const CANCELLABLE = ["queued", "running", "interrupted"];

  function renderJob(job) {
    const p = job.progress || {};
    const { rate, eta } = jobRates(job);
    const files = job.summary ? `${fmtInt(job.summary.files)} / ${fmtInt(job.summary.files)}`
      : `${fmtInt(p.files_done || 0)} / ${fmtInt(p.files_total || 0)}`;
    const live = job.status === "running" || job.status === "queued";
    return el("tr", { "data-job": job.id },
      el("td", {}, job.id.slice(0, 8)), el("td", {}, job.path),
      el("td", { class: job.status === "failed" ? "bad" : job.status === "completed" ? "good" : null, "data-status": job.status },
        JOB_WORDS[job.status] || job.status),
      el("td", {}, files, live && p.files_total ? [" ", el("progress", { max: p.files_total, value: p.files_done || 0, "aria-label": `files done of ${job.path}` })] : null),
      el("td", {}, fmtNum(rate, 1)),
      el("td", {}, live ? fmtSeconds(eta) : "-"),
      el("td", {}, job.error ? job.error.split("\n")[0] : ""),
      el("td", {}, CANCELLABLE.includes(job.status) ? el("button", {
        type: "button", class: "cancel", "data-cancel": job.id,
        "aria-label": `Cancel job ${job.id.slice(0, 8)} on ${job.path}` }, "Cancel") : null));
  }

  async function cancelJob(button) {
    const id = button.dataset.cancel;
    button.disabled = true;
    say("job-status", `Cancelling job ${id.slice(0, 8)}…`);
    const answer = await api(`/v1/jobs/${encodeURIComponent(id)}/cancel`, { method: "POST" });
    if (!answer.ok) {
      say("job-status", `The job was not cancelled: ${answer.message}`, "bad");
    } else {
      say("job-status", answer.body.status === "cancelled"
        ? `Job ${id.slice(0, 8)} cancelled; the documents it committed are kept.`
        : `Job ${id.slice(0, 8)} is stopping at its next safe point…`);
    }
    pollJobs();
  }

  $("jobs").addEventListener("click", (event) => {
    const button = event.target.closest("button[data-cancel]");
    if (button) cancelJob(button);
  });

  async function pollJobs() {
    clearTimeout(state.jobTimer);
    const answer = await api("/v1/jobs");
    if (state.page !== "jobs") return;
    if (!answer.ok) {
      say("job-status", `The jobs cannot be read: ${answer.message}`, "bad");
      return;
    }
    const jobs = answer.body.data;
    // the rows are made again at each poll: a focused Cancel button keeps the focus
    const focused = document.activeElement && document.activeElement.dataset ? document.activeElement.dataset.cancel : undefined;
    $("jobs").tBodies[0].replaceChildren(...jobs.map(renderJob));
    if (focused) {
      const again = document.querySelector(`#jobs button[data-cancel="${CSS.escape(focused)}"]`);
      if (again) again.focus();
    }
    if (!jobs.length && !$("job-status").textContent) say("job-status", "No job has run on this server yet.");
    if (jobs.some((j) => j.status === "running" || j.status === "queued")) {
      state.jobTimer = setTimeout(pollJobs, JOB_POLL_MS);
    } else if (jobs.length && !$("job-status").textContent.startsWith("The job was not cancelled")) {
      const last = jobs[0];
      say("job-status", `Job ${last.id.slice(0, 8)} on ${last.path}: ${JOB_WORDS[last.status] || last.status}` +
        (last.summary ? `, ${fmtInt(last.summary.files)} files, ${fmtInt(last.summary.chunks_encoded)} chunks encoded.`
          : last.status === "cancelled" ? "; the documents it committed are kept." : "."),
      last.status === "failed" ? "bad" : "");
    }
  }

  // ---- hardware -----------------------------------------------------------------------

  function backendState(b) {
    if (!b.available) return `not available: ${b.why}`;
    if (b.why) return b.why;
    const v = b.verification;
    if (!v) return "never checked";
    if (v.status === "fail") return `failed (${v.failure_kind || "check"}): ${v.failure}`;
    if (v.status === "pass") return v.full_grid ? "passed the full grid" : `passed first-use cases: ${v.passed.join(", ")}`;
    return "never checked";
  }

  function enginePlanTable(plan) {
    const rows = plan.rows.map((r) => el("tr", {},
      el("td", {}, r.engine, r.engine === plan.chosen ? " (pick)" : ""),
      el("td", {}, fmtNum(r.chunks_per_s, 1)),
      el("td", {}, fmtNum(r.min_cosine, 6)),
      el("td", { class: r.parity === false ? "bad" : null }, r.parity === null ? "-" : r.parity ? "yes" : "no"),
      el("td", {}, [plan.why_not[r.engine], r.detail].filter(Boolean).join("; "))));
    return el("div", { class: "scroll" }, el("table", { class: "engine-plan" },
      el("caption", {}, `Engine plan (${plan.precision}): ${plan.chosen}, ${plan.reason}`),
      el("thead", {}, el("tr", {}, ["Engine", "Chunks/s", "Min cosine", "Parity", "Why not / what it ran"].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, rows)));
  }

  async function showHardware() {
    say("hardware-status", "Reading the hardware report (a few seconds)…");
    // until the report arrives each table says it is being read, not an empty table
    $("page-hardware").setAttribute("aria-busy", "true");
    for (const id of ["engines", "backends", "plans"]) {
      const columns = Math.max(1, $(id).querySelectorAll("thead th").length);
      $(id).querySelector("tbody").replaceChildren(
        el("tr", { class: "pending" }, el("td", { colspan: String(columns), class: "muted" }, "Measuring… (a few seconds)")));
    }
    sampleMetrics();
    const answer = await api("/v1/hardware");
    $("page-hardware").removeAttribute("aria-busy");
    if (state.page !== "hardware") return;
    if (!answer.ok) {
      say("hardware-status", `The hardware report cannot be read: ${answer.message}`, "bad");
      return;
    }
    const hw = answer.body;
    say("hardware-status", `Verification policy: ${hw.verify}.`);
    const s = hw.serving;
    $("hardware-serving").replaceChildren(figure("Model", s.model), figure("Engine serving", s.engine),
      figure("Precision", s.precision), figure("Runs on", s.runs_on),
      ...Object.entries(hw.versions).filter(([, v]) => v !== "-").map(([k, v]) => figure(k, v)));
    $("engines").tBodies[0].replaceChildren(...hw.engines.status.map((e) => el("tr", { "data-engine": e.name },
      el("td", {}, e.name), el("td", {}, e.available ? "yes" : `no: ${e.reason}`),
      el("td", {}, e.auto === null || e.auto === undefined ? "-" : e.auto ? "yes" : "no"), el("td", {}, e.detail))));
    const plans = Object.values(hw.engines.plans);
    $("engine-plans").replaceChildren(...(plans.length ? plans.map((p) => (p.error ? el("p", { class: "bad" }, `Engine plan: ${p.error}`) : enginePlanTable(p)))
      : [el("p", { class: "muted" }, "No engine plan is recorded on this machine yet: `attnswitch engines` measures one (and `attnswitch run` does on first use).")]));
    $("backends").tBodies[0].replaceChildren(...hw.backends.map((b) => el("tr", { "data-backend": b.backend },
      el("td", {}, b.backend), el("td", {}, b.framework), el("td", {}, b.device || "-"),
      el("td", { class: b.verdict === "fail" ? "bad" : b.verdict === "pass" ? "good" : null }, backendState(b)))));
    const frameworks = [...new Set(hw.plans.flatMap((r) => Object.keys(r.plans)))];
    $("plans").tHead.rows[0].replaceChildren(el("th", { scope: "col" }, "Call"), ...frameworks.map((f) => el("th", { scope: "col" }, `${f} input`)));
    $("plans").tBodies[0].replaceChildren(...hw.plans.map((r) => el("tr", {}, el("td", {}, r.call),
      ...frameworks.map((f) => {
        const p = r.plans[f] || {};
        return el("td", {}, p.error || `${p.chosen || "none"} (${p.source})${p.fallbacks && p.fallbacks.length ? `; then ${p.fallbacks.join(", ")}` : ""}`);
      }))));
  }

  /** Prometheus text as {name: [[labels, value]]}. */
  function parseMetrics(text) {
    const out = {};
    for (const line of text.split("\n")) {
      if (!line || line.startsWith("#")) continue;
      const m = /^([a-zA-Z_:][\w:]*)(\{(.*)\})?\s+(\S+)/.exec(line);
      if (!m) continue;
      const labels = {};
      for (const lm of (m[3] || "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[lm[1]] = lm[2];
      (out[m[1]] = out[m[1]] || []).push([labels, Number(m[4])]);
    }
    return out;
  }

  const total = (metrics, name, keep) => (metrics[name] || []).filter(([labels]) => !keep || keep(labels)).reduce((s, [, v]) => s + v, 0);

  /** The latency quantile `q` from cumulative histogram buckets summed over labels. */
  function quantile(metrics, name, q, since) {
    const buckets = new Map();
    for (const [labels, v] of metrics[`${name}_bucket`] || []) buckets.set(labels.le, (buckets.get(labels.le) || 0) + v);
    if (since) for (const [labels, v] of since[`${name}_bucket`] || []) buckets.set(labels.le, (buckets.get(labels.le) || 0) - v);
    const edges = [...buckets.entries()].map(([le, n]) => [le === "+Inf" ? Infinity : Number(le), n]).sort((a, b) => a[0] - b[0]);
    const count = edges.length ? edges[edges.length - 1][1] : 0;
    if (!count) return null;
    const hit = edges.find(([, n]) => n >= q * count);
    return hit ? hit[0] : null;
  }

  async function sampleMetrics() {
    clearTimeout(state.metricsTimer);
    let text;
    try {
      const response = await fetch("/metrics", { cache: "no-store" });
      text = await response.text();
    } catch (err) {
      text = null;
    }
    if (state.page !== "hardware") return;
    state.metricsTimer = setTimeout(sampleMetrics, METRICS_POLL_MS);
    if (text === null) return;
    const m = parseMetrics(text);
    const now = Date.now() / 1000;
    const sample = {
      t: now, metrics: m,
      requests: total(m, "attnswitch_service_requests_total"),
      texts: total(m, "attnswitch_service_items_total"),
    };
    const prev = state.samples[state.samples.length - 1];
    sample.requestRate = prev ? (sample.requests - prev.requests) / (now - prev.t) : 0;
    sample.textRate = prev ? (sample.texts - prev.texts) / (now - prev.t) : 0;
    state.samples.push(sample);
    if (state.samples.length > CHART_SAMPLES) state.samples.shift();
    const first = state.samples[0];
    const ms = (s) => (s === null ? "-" : s === Infinity ? "over the largest bucket" : `${(s * 1000).toFixed(0)} ms or less`);
    $("counters").replaceChildren(
      figure("Requests", fmtInt(sample.requests)),
      figure("Texts per second", fmtNum(sample.textRate, 1)),
      figure("Queue depth", fmtInt(total(m, "attnswitch_service_queue_depth"))),
      figure("Latency p50 (all time)", ms(quantile(m, "attnswitch_service_request_seconds", 0.5))),
      figure("Latency p99 (all time)", ms(quantile(m, "attnswitch_service_request_seconds", 0.99))),
      figure("Latency p50 (shown window)", ms(quantile(m, "attnswitch_service_request_seconds", 0.5, first === sample ? null : first.metrics))),
      figure("Fallbacks", fmtInt(total(m, "attnswitch_attention_fallbacks_total") + total(m, "attnswitch_engine_fallbacks_total"))),
      figure("Verification failures", fmtInt(total(m, "attnswitch_attention_verifications_total", (l) => l.result === "fail"))),
      figure("Resident memory", fmtBytes(total(m, "attnswitch_service_memory_rss_bytes"))));
    drawChart();
  }

  function drawChart() {
    const svg = $("chart");
    const ns = "http://www.w3.org/2000/svg";
    const W = 600, H = 160, pad = 24;
    const samples = state.samples;
    const top = Math.max(1, ...samples.map((s) => Math.max(s.requestRate, s.textRate)));
    const x = (i) => pad + (i * (W - 2 * pad)) / (CHART_SAMPLES - 1);
    const y = (v) => H - pad - (v / top) * (H - 2 * pad);
    const node = (tag, attrs, text) => {
      const n = document.createElementNS(ns, tag);
      for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v);
      if (text !== undefined) n.textContent = text;
      return n;
    };
    const line = (key, cls) => node("polyline", { class: cls, points: samples.map((s, i) => `${x(i).toFixed(1)},${y(s[key]).toFixed(1)}`).join(" ") });
    svg.replaceChildren(
      node("line", { class: "grid", x1: pad, y1: H - pad, x2: W - pad, y2: H - pad }),
      node("line", { class: "grid", x1: pad, y1: pad, x2: W - pad, y2: pad }),
      node("text", { x: pad, y: pad - 6 }, `${top.toFixed(1)} per second`),
      node("text", { x: pad, y: H - 6 }, "0"),
      line("requestRate", "requests"), line("textRate", "texts"));
  }

  boot();
})();
