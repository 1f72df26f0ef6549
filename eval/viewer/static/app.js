/* Run viewer page (issue 41): the events table and a question page for one finished run.
 *
 * Data contract: tools/viewer_contract.md. Two ways in:
 *  - server mode: fetch("api/run"), fetch("api/events"), fetch("api/question?id=...");
 *  - static mode (file://): window.VIEWER_DATA.run / .events set by data/*.js script tags inserted at the
 *    <!-- VIEWER_DATA --> marker of index.html; a question is loaded by appending <script src="data/q/...">.
 * Routing: #/ (events page), #/q/<encodeURIComponent(event_id)>[?series=KEY] (question page).
 *
 * SECURITY: every text from the data enters the DOM via textContent / createTextNode / setAttribute of
 * harmless attributes; never innerHTML, outerHTML, insertAdjacentHTML or document.write. Links from data
 * are only made when they start with http:// or https://, with rel="noopener noreferrer".
 * ROBUSTNESS: any field may be null or missing; obj()/arr()/str()/num() below normalise before use.
 */
(function () {
  "use strict";

  // ------------------------------------------------------------------------------------------ helpers
  const SVG_NS = "http://www.w3.org/2000/svg";
  const PAGE = 500;                 // events table: rows shown at a time
  const QUESTION_TIMEOUT_MS = 10000; // static mode: a question file must load within this
  const FETCH_TIMEOUT_MS = 60000;
  const DASH = "\u2014";
  // Series / option colours: each has a contrast >= 4.5:1 on white (checked), so they work for legend text too.
  const PALETTE = ["#1f5fa8", "#b3401a", "#1b7a3a", "#7b3fa0", "#8a6400", "#0f6e78", "#a3245e", "#555555"];
  const MARKET_COLOR = "#222222";
  const PUBLIC_COLOR = "#a50e0e";
  const CLOSE_COLOR = "#444444";

  const hasOwn = (o, k) => Object.prototype.hasOwnProperty.call(o, k);
  const isObj = (x) => x !== null && typeof x === "object" && !Array.isArray(x);
  const obj = (x) => (isObj(x) ? x : {});
  const arr = (x) => (Array.isArray(x) ? x : []);
  const str = (x) => (x === null || x === undefined ? "" : String(x));
  const num = (x) => (typeof x === "number" && isFinite(x) ? x : null);
  const collator = new Intl.Collator("en", { sensitivity: "base", numeric: true });

  const fmt = (x, d) => { const n = num(x); return n === null ? DASH : n.toFixed(d === undefined ? 3 : d); };
  const fmtSigned = (x) => { const n = num(x); return n === null ? DASH : (n > 0 ? "+" : "") + n.toFixed(3); };
  const fmtInt = (x) => { const n = num(x); return n === null ? DASH : Math.round(n).toLocaleString("en-US"); };
  const orDash = (x) => (str(x) === "" ? DASH : str(x));

  /** Create an HTML element. props: text -> textContent, on<event> -> listener, others -> setAttribute
   *  (null/undefined/false skipped, true -> empty attribute). Children: nodes or strings (as text nodes). */
  function h(tag, props, ...kids) { return build(document.createElement(tag), props, kids); }
  /** Same for SVG elements. */
  function sv(tag, props, ...kids) { return build(document.createElementNS(SVG_NS, tag), props, kids); }
  function build(e, props, kids) {
    if (props) {
      for (const k of Object.keys(props)) {
        const v = props[k];
        if (v === null || v === undefined || v === false) continue;
        if (k === "text") e.textContent = str(v);
        else if (k.slice(0, 2) === "on" && typeof v === "function") e.addEventListener(k.slice(2), v);
        else e.setAttribute(k, v === true ? "" : String(v));
      }
    }
    for (const c of kids.flat(Infinity)) {
      if (c === null || c === undefined || c === false) continue;
      e.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  /** A link only for http(s) URLs (opened in a new tab, no referrer); otherwise plain text. */
  function extLink(text, url) {
    const u = str(url).trim();
    if (/^https?:\/\//i.test(u)) {
      return h("a", { href: u, rel: "noopener noreferrer", target: "_blank", class: "ext" }, text);
    }
    return h("span", { class: "title-text", title: u || null }, text);
  }

  /** A labelled form control: <div class="field"><label for=id>..</label> control</div>. */
  function field(labelText, control) {
    return h("div", { class: "field" }, h("label", { for: control.id, text: labelText }), control);
  }

  function selectEl(id, options, value, onChange) {
    const sel = h("select", { id: id, onchange: onChange },
      options.map((o) => h("option", { value: o.value, text: o.label })));
    sel.value = value;
    if (sel.selectedIndex < 0 && sel.options.length) sel.selectedIndex = 0;
    return sel;
  }

  // YYYY-MM-DD <-> day number (UTC days since the epoch).
  function dayNum(s) {
    const m = /^(\d{4})-(\d{2})-(\d{2})/.exec(str(s));
    return m ? Math.round(Date.UTC(+m[1], +m[2] - 1, +m[3]) / 86400000) : null;
  }
  const dayStr = (n) => new Date(n * 86400000).toISOString().slice(0, 10);

  // ------------------------------------------------------------------------------------------ errors
  function showError(msg) {
    const box = document.getElementById("error");
    if (box) box.appendChild(h("p", { text: msg }));
  }
  function clearErrors() {
    const box = document.getElementById("error");
    if (box) box.textContent = "";
  }
  /** Run fn; an exception becomes a visible error instead of an uncaught one. */
  function guarded(what, fn) {
    try { return fn(); } catch (e) { showError(what + ": " + str(e && e.message ? e.message : e)); return null; }
  }

  // ------------------------------------------------------------------------------------------ data access
  const VD = isObj(window.VIEWER_DATA) ? window.VIEWER_DATA : null;
  const STATIC_MODE = !!(VD && VD.run);
  if (STATIC_MODE && !isObj(VD.questions)) VD.questions = {};

  async function fetchJSON(url) {
    const ctrl = typeof AbortController === "function" ? new AbortController() : null;
    const timer = ctrl ? setTimeout(() => ctrl.abort(), FETCH_TIMEOUT_MS) : null;
    let resp, body = null;
    try {
      resp = await fetch(url, { signal: ctrl ? ctrl.signal : undefined, headers: { Accept: "application/json" } });
      const text = await resp.text();
      try { body = JSON.parse(text); } catch (e) { body = null; }
    } catch (e) {
      const why = e && e.name === "AbortError" ? "no answer within " + FETCH_TIMEOUT_MS / 1000 + " s" : str(e && e.message);
      throw new Error(url + ": " + why +
        (location.protocol === "file:" ? " (opened from disk without data: use `forecast-env view`)" : ""));
    } finally {
      if (timer) clearTimeout(timer);
    }
    if (!resp.ok) {
      throw new Error(url + ": HTTP " + resp.status + (isObj(body) && body.error ? " \u2014 " + str(body.error) : ""));
    }
    if (body === null) throw new Error(url + ": the answer is not JSON");
    return body;
  }

  const loadRun = () => (STATIC_MODE ? Promise.resolve(VD.run) : fetchJSON("api/run"));
  const loadEvents = () => (STATIC_MODE ? Promise.resolve(VD.events || { events: [] }) : fetchJSON("api/events"));

  const questionCache = new Map(); // event id -> Promise of the question JSON (dropped on failure)
  function loadQuestion(id) {
    if (questionCache.has(id)) return questionCache.get(id);
    const p = STATIC_MODE ? loadQuestionStatic(id) : fetchJSON("api/question?id=" + encodeURIComponent(id));
    questionCache.set(id, p);
    p.catch(() => questionCache.delete(id));
    if (questionCache.size > 30) questionCache.delete(questionCache.keys().next().value);
    return p;
  }

  /** Static mode: the question's data/q/<file>.js sets VIEWER_DATA.questions[id]. */
  function loadQuestionStatic(id) {
    if (hasOwn(VD.questions, id)) return Promise.resolve(VD.questions[id]);
    const row = state.byId.get(id);
    if (!row) return Promise.reject(new Error("Unknown question: " + id));
    const file = str(row.r.data_file);
    // Only plain relative paths under data/ (no "..", no scheme, no absolute path).
    if (!/^[A-Za-z0-9_\-./]+\.js$/.test(file) || file.indexOf("..") >= 0 || file[0] === "/") {
      return Promise.reject(new Error("No data file for question " + id + " in this export"));
    }
    return new Promise((resolve, reject) => {
      const script = document.createElement("script");
      let done = false;
      const finish = (err) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        if (err) { script.remove(); reject(err); return; }
        if (hasOwn(VD.questions, id)) resolve(VD.questions[id]);
        else reject(new Error("data/" + file + " loaded but does not hold question " + id));
      };
      const timer = setTimeout(() => finish(new Error("data/" + file + " did not load within 10 s")), QUESTION_TIMEOUT_MS);
      script.onload = () => finish(null);
      script.onerror = () => finish(new Error("Could not load data/" + file));
      script.src = "data/" + file;
      document.body.appendChild(script);
    });
  }

  // ------------------------------------------------------------------------------------------ state
  const state = {
    run: {},
    rows: [],            // normalised event rows: {r, i, id, q, search, split, cat, nopt}
    byId: new Map(),
    seriesList: [],      // [{key, label}] from the run
    page: null,          // "events" | "q"
    token: 0,            // route counter: a late answer for an old route is dropped
    ev: { sortKey: null, sortDir: 1, split: "", category: "", options: "", search: "", agent: "", limit: PAGE, scrollY: 0 },
    evList: [],          // the filtered, sorted rows of the events table
    q: { series: "", compare: "", rollout: null, allOptions: false },
  };

  function setRun(run) {
    state.run = obj(run);
    state.seriesList = arr(state.run.series).filter(isObj).map((s) => ({
      key: str(s.key), label: str(s.label || s.agent || s.key) || "(series)",
    })).filter((s) => s.key !== "");
  }

  function setEvents(events) {
    state.rows = arr(obj(events).events).map((r0, i) => {
      const r = obj(r0);
      const q = str(r.question);
      return {
        r, i, id: str(r.event_id), q, search: (q + " " + str(r.event_id)).toLowerCase(),
        split: str(r.split), cat: r.category === null || r.category === undefined ? null : str(r.category),
        nopt: num(r.n_options),
      };
    });
    state.byId = new Map(state.rows.map((x) => [x.id, x]));
    if (!state.seriesList.length) { // no series in the run answer: take them from the metrics
      const keys = new Set();
      state.rows.forEach((x) => Object.keys(obj(x.r.metrics)).forEach((k) => keys.add(k)));
      state.seriesList = Array.from(keys).map((k) => ({ key: k, label: k }));
    }
  }

  const seriesLabel = (key) => { const s = state.seriesList.find((x) => x.key === key); return s ? s.label : key; };
  function seriesColor(key, fallbackIndex) {
    const i = state.seriesList.findIndex((x) => x.key === key);
    return PALETTE[(i >= 0 ? i : state.seriesList.length + fallbackIndex) % PALETTE.length];
  }

  function renderRunInfo() {
    const r = state.run, box = document.getElementById("run-info");
    if (!box) return;
    const parts = [];
    if (r.run_id) parts.push("run " + str(r.run_id));
    if (r.compare_run_id) parts.push("compared with " + str(r.compare_run_id));
    if (r.mode) parts.push("mode " + str(r.mode));
    if (num(r.n_events) !== null) parts.push(fmtInt(r.n_events) + " events");
    if (state.seriesList.length) parts.push(state.seriesList.length + " series");
    if (r.created) parts.push("created " + str(r.created));
    box.textContent = parts.join(" \u00b7 ");
    if (r.workspace) box.setAttribute("title", "workspace: " + str(r.workspace));
  }

  // ------------------------------------------------------------------------------------------ routing
  function parseHash() {
    const raw = location.hash || "";
    const m = /^#\/q\/([^?]*)(?:\?(.*))?$/.exec(raw);
    if (!m) return { page: "events" };
    let id = m[1], series = null;
    try { id = decodeURIComponent(m[1]); } catch (e) { /* keep the raw text */ }
    try { series = new URLSearchParams(m[2] || "").get("series"); } catch (e) { series = null; }
    return { page: "q", id, series };
  }

  function route() {
    const token = ++state.token;
    if (state.page === "events") state.ev.scrollY = window.scrollY;
    clearErrors();
    const r = parseHash();
    const view = document.getElementById("view");
    if (!view) return;
    view.textContent = "";
    if (r.page === "q") {
      state.page = "q";
      if (r.series) state.q.series = r.series;
      showQuestion(view, r.id, token);
    } else {
      state.page = "events";
      guarded("Could not show the events page", () => renderEvents(view));
      window.scrollTo(0, state.ev.scrollY || 0);
      if (token > 1) focusTitle(); // coming back from a question: focus the heading, keep the scroll
    }
  }

  /** Move focus to the page's h1 (for keyboard and screen-reader users) without scrolling. */
  function focusTitle() {
    const t = document.getElementById("page-title");
    if (t) t.focus({ preventScroll: true });
  }

  // ------------------------------------------------------------------------------------------ events page
  /** The table's columns: fixed ones, 3 per series, market Brier, and the gap of the selected agent. */
  function eventColumns() {
    const cols = [
      { key: "question", label: "Question", type: "str", get: (x) => x.q },
      { key: "split", label: "Split", type: "str", get: (x) => x.split },
      { key: "category", label: "Category", type: "str", get: (x) => str(x.cat) },
      { key: "n_options", label: "Options", type: "num", get: (x) => x.nopt, fmt: fmtInt },
    ];
    const metric = (k, m) => (x) => num(obj(obj(x.r.metrics)[k])[m]);
    for (const s of state.seriesList) {
      cols.push({ key: s.key + ".brier", group: s.key, label: "Brier", type: "num", get: metric(s.key, "brier"), fmt: fmt,
        title: "Brier score of " + s.label + " (mean over its forecasts; lower is better)" });
      cols.push({ key: s.key + ".log_vs_market", group: s.key, label: "Log vs mkt", type: "num",
        get: metric(s.key, "log_vs_market"), fmt: fmtSigned, title: "Log score of " + s.label + " minus the market's (higher is better)" });
      cols.push({ key: s.key + ".accuracy", group: s.key, label: "Acc.", type: "num", get: metric(s.key, "accuracy"),
        fmt: (v) => fmt(v, 2), title: "Accuracy of " + s.label });
    }
    cols.push({ key: "market_brier", label: "Market Brier", type: "num", get: (x) => num(x.r.market_brier), fmt: fmt,
      title: "Brier score of the market's daily belief" });
    const agent = state.ev.agent;
    if (agent) {
      cols.push({ key: "gap", label: "Gap (" + seriesLabel(agent) + ")", type: "num", get: metric(agent, "gap"), fmt: fmt,
        title: "Mean |p(label) \u2212 market| of " + seriesLabel(agent) });
    }
    return cols;
  }

  function renderEvents(view) {
    const f = state.ev;
    if (!state.seriesList.some((s) => s.key === f.agent)) f.agent = state.seriesList.length ? state.seriesList[0].key : "";
    document.title = "Questions \u00b7 " + (str(state.run.run_id) || "run viewer");

    const uniq = (xs) => Array.from(new Set(xs.filter((x) => x !== "" && x !== null))).sort(collator.compare);
    const splits = uniq(arr(state.run.splits).map(str).concat(state.rows.map((x) => x.split)));
    const cats = uniq(arr(state.run.categories).map(str).concat(state.rows.map((x) => x.cat)));
    const anyNullCat = state.rows.some((x) => x.cat === null);

    const onFilter = () => { f.limit = PAGE; updateEventsTable(); };
    const splitSel = selectEl("filter-split", [{ value: "", label: "All splits" }].concat(splits.map((s) => ({ value: "s:" + s, label: s }))),
      f.split, (e) => { f.split = e.target.value; onFilter(); });
    const catOpts = [{ value: "", label: "All categories" }].concat(cats.map((c) => ({ value: "c:" + c, label: c })));
    if (anyNullCat) catOpts.push({ value: "none", label: "(no category)" });
    const catSel = selectEl("filter-category", catOpts, f.category, (e) => { f.category = e.target.value; onFilter(); });
    const optSel = selectEl("filter-options", [{ value: "", label: "Any" }, { value: "2", label: "2 (binary)" },
      { value: "more", label: "More than 2" }], f.options, (e) => { f.options = e.target.value; onFilter(); });
    let searchTimer = null;
    const search = h("input", { id: "search", type: "search", placeholder: "words in the question", autocomplete: "off",
      oninput: (e) => { clearTimeout(searchTimer); searchTimer = setTimeout(() => { f.search = e.target.value; onFilter(); }, 120); } });
    search.value = f.search;
    const agentSel = selectEl("agent-select", state.seriesList.map((s) => ({ value: s.key, label: s.label })), f.agent,
      (e) => { f.agent = e.target.value; if (f.sortKey === "gap") f.limit = PAGE; rebuildHead(); updatePresetLabels(); updateEventsTable(); });
    if (!state.seriesList.length) agentSel.disabled = true;

    const preset = (id, key) => h("button", { id, type: "button", class: "preset", onclick: () => {
      if (!f.agent) return;
      f.sortKey = key === "gap" ? "gap" : f.agent + ".brier";
      f.sortDir = -1; f.limit = PAGE; updateEventsTable();
    } });

    view.append(
      h("h1", { id: "page-title", tabindex: "-1", text: "Questions" }),
      h("form", { class: "filters", role: "search", onsubmit: (e) => e.preventDefault() },
        field("Split", splitSel), field("Category", catSel), field("Options", optSel), field("Search", search)),
      h("div", { class: "presets" }, field("Agent", agentSel), preset("preset-worst", "brier"), preset("preset-disagree", "gap")),
      h("p", { id: "row-count", role: "status" }),
      h("div", { class: "table-wrap" }, h("table", { id: "events-table", "data-testid": "events-table" }, h("thead"), h("tbody"))),
      h("p", null, h("button", { id: "show-more", type: "button", hidden: true, onclick: showMore })));
    if (!state.rows.length) view.appendChild(h("p", { class: "muted", text: "No events in this run." }));
    rebuildHead();
    updatePresetLabels();
    updateEventsTable();
  }

  function updatePresetLabels() {
    const lab = state.ev.agent ? seriesLabel(state.ev.agent) : "(no agent)";
    const w = document.getElementById("preset-worst"), d = document.getElementById("preset-disagree");
    if (w) w.textContent = "Worst for " + lab;
    if (d) d.textContent = "Where " + lab + " and the market disagree most";
  }

  /** (Re)build the table head: two rows, series names over their three metric columns. */
  function rebuildHead() {
    const table = document.getElementById("events-table");
    if (!table) return;
    const cols = eventColumns();
    const r1 = h("tr"), r2 = h("tr");
    const seen = new Set();
    for (const c of cols) {
      if (!c.group) { r1.appendChild(sortHeader(c, { rowspan: 2 })); continue; }
      if (!seen.has(c.group)) {
        seen.add(c.group);
        const n = cols.filter((x) => x.group === c.group).length;
        r1.appendChild(h("th", { scope: "colgroup", colspan: n, class: "group", text: seriesLabel(c.group) }));
      }
      r2.appendChild(sortHeader(c, null));
    }
    const thead = h("thead", null, r1, r2);
    table.replaceChild(thead, table.tHead);
    updateSortIndicators();
  }

  function sortHeader(c, extra) {
    return h("th", Object.assign({ scope: "col", class: c.type === "num" ? "num" : null, "data-col": c.key }, extra),
      h("button", { type: "button", class: "sort", "data-sort-key": c.key, title: c.title || null,
        onclick: () => toggleSort(c.key) }, c.label, " ", h("span", { class: "sort-ind", "aria-hidden": "true" })));
  }

  function toggleSort(key) {
    const f = state.ev;
    if (f.sortKey === key) f.sortDir = -f.sortDir;
    else { f.sortKey = key; f.sortDir = key === "question" || key === "split" || key === "category" ? 1 : -1; }
    f.limit = PAGE;
    updateEventsTable();
  }

  /** aria-sort on the sorted column only, and the arrow in each header button (updated in place: keeps focus). */
  function updateSortIndicators() {
    const f = state.ev;
    document.querySelectorAll("#events-table th[data-col]").forEach((th) => {
      const active = th.getAttribute("data-col") === f.sortKey;
      if (active) th.setAttribute("aria-sort", f.sortDir > 0 ? "ascending" : "descending");
      else th.removeAttribute("aria-sort");
      const ind = th.querySelector(".sort-ind");
      if (ind) ind.textContent = active ? (f.sortDir > 0 ? "\u25b2" : "\u25bc") : "\u2195";
    });
  }

  function filteredSorted() {
    const f = state.ev;
    const terms = f.search.toLowerCase().split(/\s+/).filter(Boolean);
    const split = f.split ? f.split.slice(2) : null;
    const list = state.rows.filter((x) =>
      (split === null || x.split === split) &&
      (!f.category || (f.category === "none" ? x.cat === null : x.cat === f.category.slice(2))) &&
      (!f.options || (f.options === "2" ? x.nopt === 2 : x.nopt !== null && x.nopt > 2)) &&
      terms.every((t) => x.search.indexOf(t) >= 0));
    const col = f.sortKey ? eventColumns().find((c) => c.key === f.sortKey) : null;
    if (!col) return list;
    // Decorate-sort-undecorate; missing values last in both directions; ties keep the original order.
    const dec = list.map((x) => { const v = col.get(x); return [v === null || v === "" ? null : v, x]; });
    const dir = f.sortDir;
    dec.sort((a, b) => {
      if (a[0] === null || b[0] === null) return a[0] === b[0] ? a[1].i - b[1].i : (a[0] === null ? 1 : -1);
      const c = col.type === "num" ? a[0] - b[0] : collator.compare(a[0], b[0]);
      return c ? c * dir : a[1].i - b[1].i;
    });
    return dec.map((d) => d[1]);
  }

  function updateEventsTable() {
    const table = document.getElementById("events-table");
    if (!table) return;
    state.evList = filteredSorted();
    updateSortIndicators();
    const tbody = h("tbody");
    appendRows(tbody, 0, Math.min(state.ev.limit, state.evList.length));
    table.replaceChild(tbody, table.tBodies[0]);
    updateCount();
  }

  function appendRows(tbody, from, to) {
    const cols = eventColumns();
    const frag = document.createDocumentFragment();
    for (let i = from; i < to; i++) frag.appendChild(eventRow(state.evList[i], cols));
    tbody.appendChild(frag);
  }

  function eventRow(x, cols) {
    const tr = document.createElement("tr");
    tr.setAttribute("data-event-id", x.id);
    for (const c of cols) {
      const td = document.createElement("td");
      if (c.key === "question") {
        td.className = "q";
        const a = document.createElement("a");
        a.href = "#/q/" + encodeURIComponent(x.id);
        a.textContent = x.q || "(no question text)";
        const id = document.createElement("span");
        id.className = "eid";
        id.textContent = x.id;
        td.append(a, id);
      } else {
        const v = c.get(x);
        td.textContent = c.fmt ? c.fmt(v) : orDash(v);
        if (c.type === "num") td.className = "num";
      }
      tr.appendChild(td);
    }
    return tr;
  }

  function showMore() {
    const table = document.getElementById("events-table");
    if (!table) return;
    const from = Math.min(state.ev.limit, state.evList.length);
    state.ev.limit += PAGE;
    appendRows(table.tBodies[0], from, Math.min(state.ev.limit, state.evList.length));
    updateCount();
  }

  function updateCount() {
    const shown = Math.min(state.ev.limit, state.evList.length), total = state.rows.length, n = state.evList.length;
    const cnt = document.getElementById("row-count");
    if (cnt) {
      cnt.textContent = "Showing " + fmtInt(shown) + " of " + fmtInt(n) + " matching question" + (n === 1 ? "" : "s") +
        (n !== total ? " (" + fmtInt(total) + " in the run)" : "");
    }
    const more = document.getElementById("show-more");
    if (more) {
      const left = n - shown;
      more.hidden = left <= 0;
      more.textContent = "Show " + fmtInt(Math.min(PAGE, left)) + " more (" + fmtInt(left) + " not shown)";
    }
  }

  // ------------------------------------------------------------------------------------------ question page
  function backLink() {
    return h("nav", { class: "crumbs", "aria-label": "Breadcrumb" },
      h("a", { id: "back-link", href: "#/", "data-testid": "back-link" }, "\u2190 All questions"));
  }

  function showQuestion(view, id, token) {
    const row = state.byId.get(id);
    view.append(backLink(), h("h1", { id: "page-title", tabindex: "-1", text: row && row.q ? row.q : id }),
      h("p", { class: "loading", text: "Loading question\u2026" }));
    document.title = (row && row.q ? row.q : id) + " \u00b7 run viewer";
    window.scrollTo(0, 0);
    focusTitle();
    loadQuestion(id).then((data) => {
      if (token !== state.token) return;
      view.textContent = "";
      guarded("Could not show question " + id, () => renderQuestion(view, id, obj(data)));
    }, (err) => {
      if (token !== state.token) return;
      const l = view.querySelector(".loading");
      if (l) l.remove();
      showError(str(err && err.message ? err.message : err) || "Could not load question " + id);
    });
  }

  /** Context of one question page: everything the chart and the columns need, normalised. */
  function questionContext(id, data) {
    const ev = obj(data.event);
    const options = arr(ev.options).map(str);
    const label = ev.label === null || ev.label === undefined ? null : str(ev.label);
    const series = arr(data.series).filter(isObj).map((s, i) => {
      const key = str(s.key) || "series" + i;
      return {
        key, label: str(s.label || s.agent || seriesLabel(key)) || key, color: seriesColor(key, i),
        rollouts: arr(s.rollouts).filter(isObj).map((r, j) => ({
          n: num(r.rollout) === null ? j : num(r.rollout), dates: arr(r.dates).filter(isObj) })),
      };
    });
    const market = arr(data.market).filter(isObj);
    // The option whose probability is charted: the realised one, else the first.
    const target = label !== null ? label : (options[0] || null);
    return { id, ev, options, label, target, series, market };
  }

  function renderQuestion(view, id, data) {
    const ctx = questionContext(id, data);
    const ev = ctx.ev, q = state.q;
    // Keep the series/compare/rollout choices across questions when they exist here.
    if (!ctx.series.some((s) => s.key === q.series)) q.series = ctx.series.length ? ctx.series[0].key : "";
    if (q.compare === q.series || !ctx.series.some((s) => s.key === q.compare)) q.compare = "";
    const title = str(ev.question) || (state.byId.get(id) || {}).q || id;
    document.title = title + " \u00b7 run viewer";

    const meta = h("dl", { class: "meta" });
    const addMeta = (k, v) => meta.append(h("dt", { text: k }), h("dd", null, v));
    addMeta("Options", ctx.options.length
      ? h("ul", { class: "options" }, ctx.options.map((o) => h("li", { class: o === ctx.label ? "realised" : null },
        o, o === ctx.label ? h("span", { class: "badge", text: "realised" }) : null)))
      : DASH);
    addMeta("Label", ctx.label === null ? "not resolved" : ctx.label);
    addMeta("Split", orDash(ev.split));
    addMeta("Category", orDash(ev.category));
    addMeta("Source", orDash(ev.source));
    addMeta("Close day", orDash(ev.close_day));
    addMeta("Public day", ev.public_day ? str(ev.public_day) + (ev.public_day_kind ? " (" + str(ev.public_day_kind) + ")" : "") : DASH);

    const multi = ctx.options.length > 2;
    const allBtn = multi ? h("button", { id: "all-options", type: "button", class: "toggle", "aria-pressed": String(q.allOptions),
      onclick: (e) => { q.allOptions = !q.allOptions; e.currentTarget.setAttribute("aria-pressed", String(q.allOptions)); redrawChart(ctx); } },
      "All options") : null;

    build(view, null, [ // build() skips nulls (Element.append would write "null")
      backLink(),
      h("h1", { id: "page-title", tabindex: "-1", text: title }),
      h("p", { class: "eid", text: id }),
      meta,
      str(ev.description) ? h("details", { class: "description" }, h("summary", { text: "Description" }),
        h("p", { class: "pre", text: str(ev.description) })) : null,
      h("section", { class: "chart-section", "aria-labelledby": "chart-h" },
        h("div", { class: "chart-head" }, h("h2", { id: "chart-h", text: "Probabilities over time" }), allBtn),
        h("div", { id: "chart", "data-testid": "chart" }),
        h("ul", { id: "legend", class: "legend" })),
      h("section", { class: "days-section", "aria-labelledby": "days-h" },
        h("h2", { id: "days-h", text: "Day by day" }),
        h("div", { class: "controls", id: "q-controls" }),
        h("div", { id: "columns", class: "columns" }))]);
    focusTitle();
    redrawChart(ctx);
    renderControls(ctx);
    renderColumns(ctx);
  }

  /** Series, compare and rollout selectors (under the chart). */
  function renderControls(ctx) {
    const box = document.getElementById("q-controls");
    if (!box) return;
    const q = state.q;
    box.textContent = "";
    if (!ctx.series.length) { box.appendChild(h("p", { class: "muted", text: "No series forecast this question." })); return; }
    const sOpts = ctx.series.map((s) => ({ value: s.key, label: s.label }));
    const sel = selectEl("series-select", sOpts, q.series, (e) => {
      q.series = e.target.value;
      if (q.compare === q.series) q.compare = "";
      renderControls(ctx); renderColumns(ctx); redrawChart(ctx);
      const again = document.getElementById("series-select");
      if (again) again.focus();
    });
    const cmp = selectEl("compare-select", [{ value: "", label: "(none)" }].concat(sOpts.filter((o) => o.value !== q.series)),
      q.compare, (e) => { q.compare = e.target.value; renderColumns(ctx); });
    const cur = ctx.series.find((s) => s.key === q.series);
    const rolls = cur ? cur.rollouts : [];
    if (!rolls.some((r) => r.n === q.rollout)) q.rollout = rolls.length ? rolls[0].n : null;
    const ro = selectEl("rollout-select", rolls.map((r) => ({ value: String(r.n), label: "rollout " + r.n })),
      String(q.rollout), (e) => { q.rollout = Number(e.target.value); renderColumns(ctx); });
    ro.disabled = rolls.length === 0;
    box.append(field("Series", sel), field("Compare with", cmp), field("Rollout", ro));
  }

  /** One column per shown series (the selected one, and the compared one when chosen). */
  function renderColumns(ctx) {
    const box = document.getElementById("columns");
    if (!box) return;
    box.textContent = "";
    const keys = [state.q.series].concat(state.q.compare ? [state.q.compare] : []);
    box.className = "columns" + (keys.length > 1 ? " two" : "");
    for (const k of keys) {
      const s = ctx.series.find((x) => x.key === k);
      if (s) box.appendChild(guarded("Could not show " + k, () => seriesColumn(ctx, s)) || h("div"));
    }
  }

  function seriesColumn(ctx, s) {
    const ro = s.rollouts.find((r) => r.n === state.q.rollout) || s.rollouts[0];
    const col = h("section", { class: "series-col", "data-series": s.key, "aria-label": s.label },
      h("h3", null, h("span", { class: "swatch-dot", "aria-hidden": "true" }), s.label,
        ro ? h("span", { class: "muted", text: " \u00b7 rollout " + ro.n + (s.rollouts.length > 1 ? " (" + s.rollouts.length + " rollouts)" : "") }) : null));
    col.querySelector(".swatch-dot").style.backgroundColor = s.color; // CSSOM: allowed under the CSP
    if (!ro || !ro.dates.length) { col.appendChild(h("p", { class: "muted", text: "No forecast dates in this rollout." })); return col; }
    ro.dates.forEach((d, i) => col.appendChild(dateBlock(ctx, d, i === 0)));
    return col;
  }

  // ------------------------------------------------------------------------------------------ date blocks
  function dateBlock(ctx, d, open) {
    const fc = obj(d.forecast), probs = obj(fc.probs);
    const pT = ctx.target !== null ? num(probs[ctx.target]) : null;
    const summary = h("summary", null, h("span", { class: "date", text: str(d.date) || "(no date)" }),
      num(d.step) !== null ? h("span", { class: "muted", text: " step " + d.step + (num(d.steps_total) !== null ? "/" + d.steps_total : "") }) : null,
      ctx.target !== null ? h("span", { text: " \u00b7 p(" + ctx.target + ") " + fmt(pT, 2) }) : null,
      h("span", { text: " \u00b7 Brier " + fmt(fc.brier) }),
      fc.fallback ? h("span", { class: "badge warn", text: "fallback" }) : null);
    const det = h("details", { class: "date-block", "data-date": str(d.date), open: !!open }, summary);
    det.appendChild(forecastBlock(ctx, fc));
    const evs = arr(d.events).filter(isObj);
    det.appendChild(h("h4", { text: "Activity (" + evs.length + ")" }));
    if (evs.length) {
      const opened = new Set(evs.filter((e) => e.kind === "open").map((e) => str(e.doc_id)));
      det.appendChild(h("ol", { class: "activity" }, evs.map((e) => activityItem(e, opened))));
    } else det.appendChild(h("p", { class: "muted", text: "No tool calls on this date." }));
    det.appendChild(notebookBlock(arr(d.notebook).filter(isObj)));
    if (Array.isArray(d.messages)) det.appendChild(messagesBlock(d.messages));
    const tok = obj(d.tokens);
    if (num(tok.prompt) !== null || num(tok.completion) !== null || num(d.cost_usd) !== null) {
      det.appendChild(h("p", { class: "usage", text: "Tokens: prompt " + fmtInt(tok.prompt) + ", completion " +
        fmtInt(tok.completion) + " \u00b7 cost " + (num(d.cost_usd) === null ? DASH : "$" + d.cost_usd.toFixed(4)) }));
    }
    return det;
  }

  function forecastBlock(ctx, fc) {
    const probs = obj(fc.probs);
    const opts = ctx.options.length ? ctx.options.slice() : Object.keys(probs);
    Object.keys(probs).forEach((o) => { if (opts.indexOf(o) < 0) opts.push(o); });
    const box = h("div", { class: "forecast" }, h("h4", { text: "Forecast" }));
    if (!Object.keys(probs).length) box.appendChild(h("p", { class: "muted", text: "No probabilities." }));
    else {
      const rows = opts.map((o) => {
        const p = num(probs[o]);
        const bar = h("span", { class: "bar" });
        bar.style.width = (p === null ? 0 : Math.max(0, Math.min(1, p)) * 100).toFixed(1) + "%";
        return h("tr", { class: o === ctx.label ? "realised" : null },
          h("th", { scope: "row" }, o, o === ctx.label ? h("span", { class: "badge", text: "realised" }) : null),
          h("td", { class: "num", text: fmt(p, 3) }), h("td", { class: "bar-cell", "aria-hidden": "true" }, bar));
      });
      box.appendChild(h("table", { class: "probs" }, h("thead", null, h("tr", null, h("th", { scope: "col", text: "Option" }),
        h("th", { scope: "col", class: "num", text: "p" }), h("th", { scope: "col", text: "" }))), h("tbody", null, rows)));
    }
    box.appendChild(h("p", { class: "scores", text: "Brier " + fmt(fc.brier) + " \u00b7 accuracy " + fmt(fc.accuracy, 2) +
      " \u00b7 log vs market " + fmtSigned(fc.log_vs_market) }));
    if (fc.fallback) box.appendChild(h("p", { class: "fallback", text: "Fallback: " + str(fc.fallback) }));
    if (str(fc.raw_report)) {
      box.appendChild(h("details", { class: "raw-report" }, h("summary", { text: "Raw report" }), h("pre", { text: str(fc.raw_report) })));
    }
    return box;
  }

  function activityItem(e, opened) {
    const kind = str(e.kind);
    const err = e.error ? h("p", { class: "err-text", text: "Error: " + str(e.error) }) : null;
    if (kind === "search") {
      const hits = arr(e.hits).filter(isObj);
      return h("li", { class: "act search" },
        h("p", null, h("span", { class: "kind", text: "Search" }), h("q", { class: "query", text: str(e.query) }),
          h("span", { class: "muted", text: " " + [e.mode ? str(e.mode) : "", num(e.k) !== null ? "k=" + e.k : "",
            hits.length + " hit" + (hits.length === 1 ? "" : "s")].filter(Boolean).join(" \u00b7 ") })),
        err,
        hits.length ? h("ol", { class: "search-hits" }, hits.map((hi) => h("li", null,
          h("span", { class: "hit-date", text: orDash(hi.date) }), " ", extLink(str(hi.title) || str(hi.doc_id) || "(untitled)", hi.url),
          " ", h("span", { class: "source", text: str(hi.source) }),
          opened.has(str(hi.doc_id)) && str(hi.doc_id) ? h("span", { class: "badge", text: "opened" }) : null))) : null);
    }
    if (kind === "open") {
      return h("li", { class: "act opened-article" },
        h("p", null, h("span", { class: "kind", text: "Opened" }), extLink(str(e.title) || str(e.doc_id) || "(untitled)", e.url),
          h("span", { class: "muted", text: " " + [str(e.date), str(e.source)].filter(Boolean).join(" \u00b7 ") })),
        err,
        str(e.excerpt) ? h("details", { class: "excerpt" }, h("summary", { text: "Excerpt" }), h("p", { class: "pre", text: str(e.excerpt) })) : null);
    }
    if (kind === "note_add") {
      const docs = arr(e.doc_ids).map(str).filter(Boolean);
      return h("li", { class: "act note-entry note-add" },
        h("p", null, h("span", { class: "kind", text: "Note #" + orDash(e.entry_id) + " added" }), str(e.claim)),
        h("p", { class: "muted", text: "observed " + orDash(e.date_observed) + (docs.length ? " \u00b7 sources: " + docs.join(", ") : "") }));
    }
    if (kind === "note_supersede") {
      return h("li", { class: "act note-entry note-supersede" },
        h("p", null, h("span", { class: "kind", text: "Note #" + orDash(e.entry_id) + " superseded" }), str(e.reason)));
    }
    // "other" tool calls and any kind this page does not know yet.
    return h("li", { class: "act other" },
      h("p", null, h("span", { class: "kind", text: kind === "other" ? "Tool " + (str(e.tool) || "?") : "Event " + (kind || "?") })),
      str(e.args) ? h("pre", { class: "args", text: str(e.args) }) : null, err);
  }

  function notebookBlock(entries) {
    const active = entries.filter((n) => n.status !== "superseded").length;
    return h("details", { class: "notebook" },
      h("summary", { text: "Notebook at the end of the day (" + active + " active, " + (entries.length - active) + " superseded)" }),
      entries.length ? h("ul", null, entries.map((n) => h("li", { class: "notebook-entry " + (n.status === "superseded" ? "superseded" : "active") },
        h("span", { class: "muted", text: "#" + orDash(n.entry_id) + " " }), str(n.claim),
        h("span", { class: "muted", text: " (observed " + orDash(n.date_observed) + (n.status === "superseded" ? ", superseded" : "") + ")" }))))
        : h("p", { class: "muted", text: "Empty." }));
  }

  function messagesBlock(messages) {
    const ms = messages.filter(isObj);
    return h("details", { class: "messages" }, h("summary", { text: "Messages (" + ms.length + ")" }),
      ms.map((m) => h("div", { class: "message role-" + (str(m.role).replace(/[^a-z]/gi, "") || "x") },
        h("p", { class: "role", text: str(m.role) || "(role?)" }),
        h("pre", { text: typeof m.content === "string" ? m.content : (m.content == null ? "" : JSON.stringify(m.content, null, 1)) }))));
  }

  // ------------------------------------------------------------------------------------------ chart
  function redrawChart(ctx) {
    const box = document.getElementById("chart"), legend = document.getElementById("legend");
    if (!box || !legend) return;
    box.textContent = "";
    legend.textContent = "";
    guarded("Could not draw the chart", () => drawChart(ctx, box, legend));
  }

  function drawChart(ctx, box, legend) {
    const W = 920, H = 340, M = { l: 52, r: 24, t: 40, b: 36 };
    const pw = W - M.l - M.r, ph = H - M.t - M.b;
    const allOpts = state.q.allOptions && ctx.options.length > 2;
    const sel = ctx.series.find((s) => s.key === state.q.series);
    const shown = allOpts ? (sel ? [sel] : []) : ctx.series;
    if (ctx.target === null) { box.appendChild(h("p", { class: "muted", text: "No options: nothing to chart." })); return; }

    // X domain: first market/forecast date (or the public day) to the close day.
    const ds = [];
    ctx.market.forEach((m) => ds.push(dayNum(m.date)));
    ctx.series.forEach((s) => s.rollouts.forEach((r) => r.dates.forEach((d) => ds.push(dayNum(d.date)))));
    const close = dayNum(ctx.ev.close_day), pub = dayNum(ctx.ev.public_day);
    const all = ds.concat([close, pub]).filter((x) => x !== null);
    if (!all.length) { box.appendChild(h("p", { class: "muted", text: "No dates to chart." })); return; }
    let x0 = Math.min.apply(null, all), x1 = Math.max.apply(null, all);
    if (x0 === x1) { x0 -= 1; x1 += 1; }
    const X = (d) => M.l + ((d - x0) / (x1 - x0)) * pw;
    const Y = (p) => M.t + (1 - p) * ph;

    const svg = sv("svg", { viewBox: "0 0 " + W + " " + H, role: "img", "aria-labelledby": "chart-title", class: "chart" },
      sv("title", { id: "chart-title", text: allOpts ? "Every option's probability: " + (sel ? sel.label : "") + " and the market"
        : "Probability of " + ctx.target + ": market and " + ctx.series.length + " series" }));
    // Gridlines and the y axis.
    for (let i = 0; i <= 10; i++) {
      const p = i / 10, y = Y(p);
      svg.appendChild(sv("line", { x1: M.l, x2: W - M.r, y1: y, y2: y, class: i % 5 === 0 ? "grid major" : "grid" }));
      if (i % 2 === 0) svg.appendChild(sv("text", { x: M.l - 6, y: y + 4, class: "tick", "text-anchor": "end", text: p.toFixed(1) }));
    }
    svg.appendChild(sv("text", { x: 14, y: M.t + ph / 2, class: "axis-label", "text-anchor": "middle",
      transform: "rotate(-90 14 " + (M.t + ph / 2) + ")", text: allOpts ? "probability" : "p(" + ctx.target + ")" }));
    // X ticks: a step giving at most ~10 labels.
    const span = x1 - x0;
    const step = [1, 2, 3, 7, 14, 28, 56, 91, 182, 365, 730].find((s) => span / s <= 10) || Math.ceil(span / 10);
    let lastYear = null;
    for (let d = x0; d <= x1; d += step) {
      const s = dayStr(d), yr = s.slice(0, 4);
      svg.appendChild(sv("line", { x1: X(d), x2: X(d), y1: M.t + ph, y2: M.t + ph + 5, class: "axis" }));
      svg.appendChild(sv("text", { x: X(d), y: M.t + ph + 18, class: "tick", "text-anchor": "middle", text: yr !== lastYear ? s : s.slice(5) }));
      lastYear = yr;
    }
    svg.appendChild(sv("line", { x1: M.l, x2: W - M.r, y1: M.t + ph, y2: M.t + ph, class: "axis" }));

    // Vertical markers: public day and close day (labels staggered when close together).
    const marks = [];
    if (pub !== null) marks.push({ d: pub, text: "public " + dayStr(pub) + (ctx.ev.public_day_kind ? " (" + str(ctx.ev.public_day_kind) + ")" : ""), color: PUBLIC_COLOR });
    if (close !== null) marks.push({ d: close, text: "close " + dayStr(close), color: CLOSE_COLOR });
    const boxes = [];
    marks.forEach((m) => {
      const x = X(m.d), w = m.text.length * 7; // rough label width at 11.5px
      const anchor = x > W - w / 2 - 4 ? "end" : x < w / 2 + 4 ? "start" : "middle";
      const left = anchor === "end" ? x - w : anchor === "start" ? x : x - w / 2;
      const clash = boxes.some((b) => left < b.right + 8 && left + w > b.left - 8);
      boxes.push({ left, right: left + w });
      const y = clash ? M.t - 24 : M.t - 9;
      svg.appendChild(sv("line", { x1: x, x2: x, y1: M.t - 4, y2: M.t + ph, stroke: m.color, class: "marker" }, sv("title", { text: m.text })));
      svg.appendChild(sv("text", { x: x, y: y, fill: m.color, class: "marker-label", "text-anchor": anchor, text: m.text }));
    });

    // One polyline + titled points per line; points without a probability break the line.
    const drawLine = (pts, color, width, dash, pointR, hollowFn, cls) => {
      const g = sv("g", { class: cls });
      let seg = [];
      const flush = () => {
        if (seg.length > 1) g.appendChild(sv("polyline", { points: seg.map((q) => q.x.toFixed(1) + "," + q.y.toFixed(1)).join(" "),
          fill: "none", stroke: color, "stroke-width": width, "stroke-dasharray": dash || null }));
        seg = [];
      };
      pts.forEach((q) => { if (q.p === null || q.d === null) { flush(); return; } seg.push({ x: X(q.d), y: Y(Math.max(0, Math.min(1, q.p))) }); });
      flush();
      pts.forEach((q) => {
        if (q.p === null || q.d === null) return;
        g.appendChild(sv("circle", { cx: X(q.d).toFixed(1), cy: Y(Math.max(0, Math.min(1, q.p))).toFixed(1), r: pointR,
          fill: hollowFn && hollowFn(q) ? "#ffffff" : color, stroke: color, "stroke-width": 1.5 }, sv("title", { text: q.tip })));
      });
      svg.appendChild(g);
    };
    const marketPts = (opt) => ctx.market.map((m) => {
      const p = num(obj(m.probs)[opt]);
      return { d: dayNum(m.date), p, tip: "market " + str(m.date) + ": p(" + opt + ") = " + fmt(p) };
    }).sort((a, b) => a.d - b.d);
    const seriesPts = (s, r, opt) => r.dates.map((d) => {
      const fc = obj(d.forecast), p = num(obj(fc.probs)[opt]);
      return { d: dayNum(d.date), p, fb: !!fc.fallback, tip: s.label + (s.rollouts.length > 1 ? " rollout " + r.n : "") + " \u00b7 " + str(d.date) +
        ": p(" + opt + ") = " + fmt(p) + " \u00b7 Brier " + fmt(fc.brier) + (fc.fallback ? " \u00b7 fallback: " + str(fc.fallback) : "") };
    }).sort((a, b) => a.d - b.d);
    const swatch = (color, dash, dot) => sv("svg", { class: "swatch", width: 28, height: 12, "aria-hidden": "true" },
      sv("line", { x1: 1, x2: 27, y1: 6, y2: 6, stroke: color, "stroke-width": 2.5, "stroke-dasharray": dash || null }),
      dot ? sv("circle", { cx: 14, cy: 6, r: 3.5, fill: color }) : null);
    const legendItem = (color, dash, dot, text) => {
      const li = h("li", null, swatch(color, dash, dot), h("span", { text }));
      li.lastChild.style.color = color; // legend text in the line's colour (all colours >= 4.5:1 on white)
      legend.appendChild(li);
    };

    if (allOpts) {
      ctx.options.forEach((o, i) => {
        const c = PALETTE[i % PALETTE.length];
        drawLine(marketPts(o), c, 1.5, "5 4", 2, null, "market");
        if (sel) sel.rollouts.forEach((r) => drawLine(seriesPts(sel, r, o), c, sel.rollouts.length > 1 ? 1.25 : 2.25, null, 3.5, (q) => q.fb, "series"));
        legendItem(c, null, true, o + (o === ctx.label ? " (realised)" : ""));
      });
      legend.appendChild(h("li", { class: "muted", text: "solid with points: " + (sel ? sel.label : "(no series)") + "; dashed: market" }));
    } else {
      if (ctx.market.length) { drawLine(marketPts(ctx.target), MARKET_COLOR, 2, null, 2, null, "market"); legendItem(MARKET_COLOR, null, false, "market"); }
      // The selected series is drawn last (on top).
      shown.slice().sort((a, b) => (a.key === state.q.series) - (b.key === state.q.series)).forEach((s) => {
        s.rollouts.forEach((r) => drawLine(seriesPts(s, r, ctx.target), s.color, s.rollouts.length > 1 ? 1.25 : 2.25, null, 3.5, (q) => q.fb, "series"));
      });
      shown.forEach((s) => legendItem(s.color, null, true, s.label + (s.rollouts.length > 1 ? " (" + s.rollouts.length + " rollouts)" : "")));
      if (ctx.label === null) legend.appendChild(h("li", { class: "muted", text: "not resolved: showing " + ctx.target }));
    }
    legend.appendChild(h("li", { class: "muted", text: "hollow point: fallback forecast" }));
    box.appendChild(svg);
  }

  // ------------------------------------------------------------------------------------------ start
  async function init() {
    const fail = (what) => (e) => { showError("Could not load " + what + ": " + str(e && e.message ? e.message : e)); return null; };
    const [run, events] = await Promise.all([loadRun().catch(fail("the run")), loadEvents().catch(fail("the events"))]);
    const errs = document.getElementById("error");
    const keep = errs ? Array.from(errs.childNodes) : [];
    guarded("Bad run data", () => setRun(run));
    guarded("Bad events data", () => setEvents(events));
    renderRunInfo();
    window.addEventListener("hashchange", route);
    route();
    if (errs) keep.forEach((n) => errs.appendChild(n)); // route() cleared them: loading errors stay visible
  }

  init().catch((e) => showError("The viewer could not start: " + str(e && e.message)));
})();
