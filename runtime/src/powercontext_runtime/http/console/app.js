// The PowerContext web console (docs/ui.md). Plain JavaScript, no dependencies, served by the
// daemon under a CSP that forbids inline script. Stored text is untrusted: it is only ever
// put into the page as text (textContent), never as HTML.
"use strict";
(() => {
  const DICT = window.PowerContextI18n;
  // The session's credential (docs/ui.md § Security): kept in sessionStorage, which only this
  // origin (scheme, host and port) and this tab can read, and sent in a header a browser never
  // adds by itself. No cookie.
  const SESSION_HEADER = "X-PowerContext-Session";
  const SESSION_KEY = "powercontext.session";
  const FIELDS = {
    experience: ["situation", "action", "outcome", "lesson"],
    skill: ["name", "description", "instructions", "validation"],
  };
  const state = {
    lang: pickLanguage(),
    session: null,
    scope: localStorage.getItem("powercontext.scope") || "",
    flash: null,
    inbox: { status: "pending", family: "", selected: null },
    pack: { prompt: "", maxBytes: 8000, result: null },
    memory: { query: "", state: "active", kind: "", tag: "" },
    activity: { days: 14 },
  };
  const root = document.getElementById("app");

  function pickLanguage() {
    const saved = localStorage.getItem("powercontext.lang");
    if (saved === "en" || saved === "zh") return saved;
    const wanted = navigator.languages && navigator.languages.length ? navigator.languages : [navigator.language || "en"];
    for (const tag of wanted) {
      const lower = String(tag).toLowerCase();
      if (lower.startsWith("zh")) return "zh";
      if (lower.startsWith("en")) return "en";
    }
    return "en";
  }

  function t(key, vars) {
    const text = (DICT[state.lang] && DICT[state.lang][key]) || DICT.en[key] || key;
    return text.replace(/\{(\w+)\}/g, (_, name) => (vars && name in vars ? String(vars[name]) : ""));
  }

  // Characters a reader could not see as stored: controls but newline and tab (C0, DEL, C1),
  // invisible formatting characters (bidi embeddings, overrides, isolates and marks,
  // zero-width characters, tag characters), lone surrogates and the line and paragraph
  // separators. Shown as escapes (docs/security.md § What the terminal shows is what is
  // stored), so an agent's U+202E cannot reorder what a reviewer approves. The joiners
  // U+200C/U+200D stay: scripts and emoji need them.
  const HIDDEN = /[\p{Cc}\p{Cf}\p{Cs}\u2028\u2029]/gu;
  const ANY_HIDDEN = /[\p{Cc}\p{Cf}\p{Cs}\u2028\u2029]/u;
  const KEPT = new Set(["\n", "\t", "\u200c", "\u200d"]);

  function escapeOf(ch) {
    if (ch === "\r") return "\\r";
    const code = ch.codePointAt(0);
    const hex = code.toString(16);
    if (code < 0x100) return "\\x" + hex.padStart(2, "0");
    return code < 0x10000 ? "\\u" + hex.padStart(4, "0") : "\\U" + hex.padStart(8, "0");
  }

  // Text as a node the page shows exactly: each hidden character becomes a marked escape
  // (span.hidden-char, its code point in the title), the rest a plain text node.
  function shown(text) {
    if (!ANY_HIDDEN.test(text)) return document.createTextNode(text);
    const out = document.createDocumentFragment();
    let last = 0;
    for (const match of text.matchAll(HIDDEN)) {
      const ch = match[0];
      if (KEPT.has(ch)) continue;
      if (match.index > last) out.append(text.slice(last, match.index));
      const mark = document.createElement("span");
      mark.className = "hidden-char";
      mark.textContent = escapeOf(ch);
      mark.title = "U+" + ch.codePointAt(0).toString(16).toUpperCase().padStart(4, "0");
      out.append(mark);
      last = match.index + ch.length;
    }
    if (last < text.length) out.append(text.slice(last));
    return out;
  }

  // h("button", {class: "primary", onclick: f}, "text", child…): an element; strings become
  // text shown exactly (shown()).
  function h(tag, props, ...children) {
    const el = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
      else if (key === "class") el.className = value;
      else if (key === "text") el.replaceChildren(shown(String(value)));
      else if (value === true) el.setAttribute(key, "");
      else el.setAttribute(key, String(value));
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      el.append(child instanceof Node ? child : shown(String(child)));
    }
    return el;
  }

  class ApiError extends Error {
    constructor(status, error) {
      super((error && error.message) || "HTTP " + status);
      this.status = status;
      this.code = (error && error.code) || "http_" + status;
      this.details = (error && error.details) || {};
    }
  }

  function credential() {
    try { return sessionStorage.getItem(SESSION_KEY); } catch (_) { return null; }
  }

  function keepCredential(value) {
    try {
      if (value) sessionStorage.setItem(SESSION_KEY, value);
      else sessionStorage.removeItem(SESSION_KEY);
    } catch (_) { /* storage refused: the session lasts until the page is left */ }
  }

  async function request(method, path, body) {
    const headers = { Accept: "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const held = credential();
    if (held) headers[SESSION_HEADER] = held;
    let response;
    try {
      response = await fetch(path, {
        method, headers, credentials: "omit", cache: "no-store",
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (_) {
      throw new ApiError(0, { code: "network", message: t("error.network") });
    }
    const text = await response.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch (_) { data = null; }
    if (!response.ok) {
      const error = new ApiError(response.status, data && data.error);
      if (response.status === 401 && path.startsWith("/v1/")) {
        keepCredential(null);
        state.session = null;
        state.flash = { kind: "warn", text: t("login.expired") };
        render();
      }
      throw error;
    }
    return data;
  }

  const api = (path, body) => request("POST", path, body);

  function describeError(error) {
    if (error.code === "network") return t("error.network");
    if (error.code === "scope_forbidden") return t("error.scope");
    if (error.code === "capability_forbidden") return t("forbidden.review");
    return t("error.generic", { message: error.message });
  }

  function alertBox(kind, text, ...extra) {
    return h("div", { class: "alert " + kind, role: kind === "ok" ? "status" : "alert" }, text, ...extra);
  }

  function can(capability) {
    return !!state.session && state.session.capabilities.includes(capability);
  }

  // -- routing -------------------------------------------------------------------------------

  function route() {
    const hash = location.hash.replace(/^#\/?/, "");
    const [view, ...rest] = hash.split("/");
    const known = ["inbox", "memory", "pack", "bootstrap", "activity"];
    return { view: known.includes(view) ? view : "inbox", arg: rest.join("/") ? decodeURIComponent(rest.join("/")) : null };
  }

  async function start() {
    try {
      const session = await request("GET", "/ui/session");
      state.session = session.logged_in ? session : null;
      if (!state.session) keepCredential(null);
    } catch (error) {
      state.session = null;
      if (error.status !== 401) state.flash = { kind: "error", text: describeError(error) };
    }
    window.addEventListener("hashchange", () => render(true));
    render();
  }

  function render(focusMain) {
    document.documentElement.lang = state.lang === "zh" ? "zh-CN" : "en";
    document.title = "PowerContext";
    root.replaceChildren();
    root.removeAttribute("aria-busy");
    if (!state.session) {
      root.append(loginView());
      const input = document.getElementById("login-token");
      if (input) input.focus();
      return;
    }
    const current = route();
    root.append(h("a", { class: "skip", href: "#main", onclick: (e) => { e.preventDefault(); document.getElementById("main").focus(); } }, t("skip")));
    root.append(headerView(current));
    const main = h("main", { id: "main", tabindex: "-1" });
    root.append(main);
    if (state.flash) {
      main.append(alertBox(state.flash.kind, state.flash.text));
      state.flash = null;
    }
    if (current.view === "pack") main.append(packView());
    else if (current.view === "memory") main.append(memoryView(current.arg));
    else if (current.view === "bootstrap") main.append(bootstrapView());
    else if (current.view === "activity") main.append(activityView());
    else main.append(inboxView(current.arg, focusMain));
    if (focusMain) {
      const heading = main.querySelector("h1");
      if (heading) heading.focus();
    }
  }

  function languageButton() {
    return h("button", {
      type: "button", id: "lang-toggle", lang: state.lang === "en" ? "zh-CN" : "en",
      "aria-label": t("lang.switch.label"),
      onclick: () => {
        state.lang = state.lang === "en" ? "zh" : "en";
        localStorage.setItem("powercontext.lang", state.lang);
        render();
        const again = document.getElementById("lang-toggle");
        if (again) again.focus();
      },
    }, t("lang.switch"));
  }

  function headerView(current) {
    const link = (view, label) => h("li", {}, h("a", {
      href: "#/" + view, id: "nav-" + view, "aria-current": current.view === view ? "page" : null,
    }, label));
    const scopeInput = h("input", {
      id: "scope-input", name: "scope", value: state.scope, placeholder: t("scope.placeholder"),
      autocomplete: "off", spellcheck: "false", "aria-describedby": "scope-label",
    });
    const scopeForm = h("form", {
      class: "scope", onsubmit: (e) => {
        e.preventDefault();
        state.scope = scopeInput.value.trim();
        localStorage.setItem("powercontext.scope", state.scope);
        state.inbox.selected = null;
        state.pack.result = null;
        if (route().arg) location.hash = "#/" + route().view;
        else render();
        const again = document.getElementById("scope-input");
        if (again) again.focus();
      },
    }, h("label", { for: "scope-input", id: "scope-label" }, t("scope.label")), scopeInput,
      h("button", { type: "submit", id: "scope-use" }, t("scope.use")));
    const session = state.session;
    const who = session.auth === "off" ? t("who.off")
      : t("who", { name: session.token_name, caps: session.capabilities.join(", ") });
    return h("header", { class: "top" },
      h("p", { class: "brand" }, t("brand")),
      h("nav", { "aria-label": t("nav.label") }, h("ul", {}, link("inbox", t("nav.inbox")), link("memory", t("nav.memory")),
        link("pack", t("nav.pack")), link("bootstrap", t("nav.bootstrap")), link("activity", t("nav.activity")))),
      scopeForm,
      h("span", { class: "spacer" }),
      h("span", { class: "who", id: "who" }, who),
      languageButton(),
      session.auth === "off" ? null : h("button", { type: "button", id: "logout", onclick: logout }, t("logout")));
  }

  async function logout() {
    try { await request("POST", "/ui/logout"); } catch (_) { /* forgotten here either way */ }
    keepCredential(null);
    state.session = null;
    render();
  }

  // -- login ---------------------------------------------------------------------------------

  function loginView() {
    const input = h("input", { id: "login-token", name: "token", type: "password", autocomplete: "off", required: true, spellcheck: "false" });
    const message = h("div", { id: "login-message" });
    if (state.flash) { message.append(alertBox(state.flash.kind, state.flash.text)); state.flash = null; }
    const button = h("button", { type: "submit", class: "primary", id: "login-submit" }, t("login.submit"));
    const form = h("form", {
      class: "login", method: "post", action: "/ui/login",
      onsubmit: async (e) => {
        e.preventDefault();
        button.disabled = true;
        message.replaceChildren();
        try {
          const { credential: issued, ...session } = await request("POST", "/ui/login", { token: input.value.trim() });
          keepCredential(issued);
          state.session = session;
          input.value = "";
          render(true);
        } catch (error) {
          button.disabled = false;
          const text = error.status === 401 ? t("login.failed")
            : error.code === "capability_forbidden" ? t("login.noread") : describeError(error);
          message.append(alertBox("error", text));
          input.focus();
        }
      },
    },
    h("h1", { tabindex: "-1" }, t("login.title")),
    h("p", { class: "muted" }, t("login.intro")),
    h("div", { class: "field" }, h("label", { for: "login-token" }, t("login.token")), input),
    message,
    h("div", { class: "row" }, button, h("span", { class: "spacer" }), languageButton()));
    return h("main", { id: "main", tabindex: "-1" }, form);
  }

  // -- Review Inbox --------------------------------------------------------------------------

  function needScope(container) {
    if (state.scope) return false;
    container.append(alertBox("warn", t("scope.missing")));
    return true;
  }

  function inboxView(candidateId, focusCandidate) {
    const section = h("section", { "aria-labelledby": "inbox-title" }, h("h1", { id: "inbox-title", tabindex: "-1" }, t("inbox.title")));
    if (needScope(section)) return section;
    const status = h("select", { id: "inbox-status", onchange: () => { state.inbox.status = status.value; location.hash = "#/inbox"; render(); } },
      ...["pending", "approved", "rejected"].map((s) => h("option", { value: s, selected: state.inbox.status === s }, t("status." + s))));
    const family = h("select", { id: "inbox-family", onchange: () => { state.inbox.family = family.value; location.hash = "#/inbox"; render(); } },
      h("option", { value: "", selected: !state.inbox.family }, t("inbox.family.all")),
      ...["experience", "skill"].map((f) => h("option", { value: f, selected: state.inbox.family === f }, t("family." + f))));
    section.append(h("div", { class: "row" },
      h("div", { class: "field" }, h("label", { for: "inbox-status" }, t("inbox.status")), status),
      h("div", { class: "field" }, h("label", { for: "inbox-family" }, t("inbox.family")), family),
      h("div", { class: "field" }, h("button", { type: "button", id: "inbox-refresh", onclick: () => render() }, t("refresh")))));
    const list = h("div", { class: "list", "aria-live": "polite" }, h("p", { class: "muted" }, t("loading")));
    const detail = h("div", { id: "candidate-detail", class: "detail" });
    section.append(h("div", { class: "inbox" },
      h("nav", { "aria-label": t("inbox.list") }, list), detail));
    loadCandidates(list, candidateId);
    if (candidateId) loadCandidate(detail, candidateId, null, { focus: !!focusCandidate });
    else detail.append(h("p", { class: "muted" }, t("inbox.pick")));
    return section;
  }

  async function loadCandidates(list, selected, cursor, ul) {
    const body = { scope_id: state.scope, status: state.inbox.status, limit: 50 };
    if (state.inbox.family) body.family = state.inbox.family;
    if (cursor) body.cursor = cursor;
    let page;
    try {
      page = await api("/v1/artifact-candidates/list", body);
    } catch (error) {
      list.replaceChildren(alertBox("error", describeError(error)));
      return;
    }
    if (!ul) {
      list.replaceChildren();
      if (!page.candidates.length) {
        list.append(h("p", { class: "muted", id: "inbox-empty" }, t("inbox.empty", { status: t("status." + state.inbox.status) })));
        return;
      }
      ul = h("ul", { class: "candidates", id: "candidate-list" });
      list.append(ul);
    }
    for (const candidate of page.candidates) {
      ul.append(h("li", {}, h("button", {
        type: "button", class: "candidate", "data-candidate": candidate.candidate_id,
        "aria-current": candidate.candidate_id === selected ? "true" : null,
        onclick: () => { location.hash = "#/inbox/" + encodeURIComponent(candidate.candidate_id); },
      },
      h("span", { class: "title" }, candidateTitle(candidate)),
      h("span", { class: "meta" }, t("family." + candidate.family), " · ", t("cand.version", { version: candidate.version }), " · ",
        h("span", { class: "proposed-by", "data-proposed-by": candidate.proposed_by }, proposedBy(candidate)), " · ", candidate.candidate_id))));
    }
    const old = list.querySelector("button.more");
    if (old) old.remove();
    if (page.next_cursor) {
      list.append(h("button", { type: "button", class: "more", onclick: () => loadCandidates(list, selected, page.next_cursor, ul) }, t("inbox.more")));
    }
  }

  // Who proposed it: an agent over the API, or one of the runtime's distillers (from recorded
  // task results), so a reviewer knows whether a rule, a model or an agent wrote the lesson.
  function proposedBy(candidate) {
    return t("cand.proposed", { who: t("proposer." + (candidate.proposed_by || "agent")) });
  }

  function candidateTitle(candidate) {
    const p = candidate.proposal || {};
    const text = candidate.family === "skill" ? p.name : p.lesson || p.situation;
    return String(text || candidate.candidate_id).slice(0, 120);
  }

  // options.focus: move the focus to the candidate's heading once shown (it was opened, or a
  // decision replaced the panel the focus was in); options.diffBase: what to compare with.
  async function loadCandidate(detail, candidateId, notice, options) {
    const opts = options || {};
    detail.replaceChildren(h("p", { class: "muted" }, t("loading")));
    let candidate;
    try {
      candidate = await api("/v1/artifact-candidates/get", { scope_id: state.scope, candidate_id: candidateId });
    } catch (error) {
      detail.replaceChildren(alertBox("error", describeError(error)));
      return;
    }
    detail.replaceChildren(candidateView(detail, candidate, notice, opts.diffBase));
    const heading = document.getElementById("candidate-title");
    if (heading && (opts.focus || notice)) heading.focus();
  }

  function candidateView(detail, candidate, notice, diffBase) {
    const panel = h("article", {
      class: "panel", "aria-labelledby": "candidate-title",
      "data-candidate": candidate.candidate_id, "data-version": candidate.version,
    });
    panel.append(h("h2", { id: "candidate-title", tabindex: "-1" },
      t("cand.title", { family: t("family." + candidate.family) }), " ",
      h("span", { class: "badge " + candidate.status, id: "candidate-status" }, t("status." + candidate.status)), " ",
      h("span", { class: "muted", id: "candidate-version" }, t("cand.version", { version: candidate.version }))));
    if (notice) panel.append(notice);
    const meta = h("dl", { class: "meta" });
    const row = (label, value) => meta.append(h("dt", {}, label), h("dd", {}, value));
    row(t("cand.id"), h("code", {}, candidate.candidate_id));
    row(t("cand.proposer"), h("span", { id: "candidate-proposed-by", "data-proposed-by": candidate.proposed_by }, t("proposer." + (candidate.proposed_by || "agent"))));
    row(t("cand.created"), candidate.created_at);
    row(t("cand.updated"), candidate.updated_at);
    row(t("cand.target"), candidate.target ? refText(candidate.target) : t("cand.target.none"));
    if (candidate.reason) row(t("cand.reason"), candidate.reason);
    if (candidate.result_artifact) row(t("cand.result"), refText(candidate.result_artifact));
    if (candidate.decision_reason) row(t("cand.decision"), candidate.decision_reason);
    panel.append(meta);
    panel.append(diffSection(candidate, diffBase));
    panel.append(evidenceSection(candidate));
    if (candidate.status === "pending") panel.append(actionsSection(detail, candidate));
    return panel;
  }

  function refText(ref) {
    return t("evidence.artifact", { family: ref.family, id: ref.artifact_id, revision: ref.revision });
  }

  // What the proposal is compared with: the target's current revision when it changes one,
  // else the candidate's previous version; a new v1 is compared with nothing.
  function diffSection(candidate, wanted) {
    const section = h("section", { "aria-labelledby": "diff-title" }, h("h3", { id: "diff-title" }, t("diff.title")));
    const choices = [];
    if (candidate.target) choices.push({ key: "target", label: t("diff.base.target", { ref: refText(candidate.target) }) });
    if (candidate.version > 1) choices.push({ key: "previous", label: t("diff.base.previous", { version: candidate.version - 1 }) });
    choices.push({ key: "none", label: t("diff.base.none") });
    const select = h("select", { id: "diff-base" }, ...choices.map((c) => h("option", { value: c.key, selected: c.key === wanted }, c.label)));
    const body = h("div", { id: "diff-body", "aria-live": "polite" });
    section.append(h("div", { class: "field" }, h("label", { for: "diff-base" }, t("diff.base")), select), body);
    const show = async () => {
      body.replaceChildren(h("p", { class: "muted" }, t("loading")));
      let base = {};
      try {
        if (select.value === "target") {
          const path = candidate.target.family === "skill" ? "/v1/skill/get" : "/v1/experience/get";
          base = (await api(path, { scope_id: state.scope, artifact: candidate.target })).content;
        } else if (select.value === "previous") {
          base = (await api("/v1/artifact-candidates/get", { scope_id: state.scope, candidate_id: candidate.candidate_id, version: candidate.version - 1 })).proposal;
        }
      } catch (error) {
        body.replaceChildren(alertBox("error", describeError(error)));
        return;
      }
      body.replaceChildren(...proposalDiff(candidate.family, base, candidate.proposal));
    };
    select.addEventListener("change", show);
    show();
    return section;
  }

  function fieldText(value) {
    if (value === undefined || value === null) return "";
    if (Array.isArray(value)) return value.map((v) => "• " + v).join("\n");
    return String(value);
  }

  function proposalDiff(family, base, proposal) {
    const names = [...(FIELDS[family] || [])];
    for (const key of Object.keys(proposal)) if (!names.includes(key)) names.push(key);
    const out = [];
    for (const name of names) {
      const before = fieldText(base[name]);
      const after = fieldText(proposal[name]);
      const label = DICT.en["field." + name] ? t("field." + name) : name;
      const head = h("div", { class: "fieldname", "data-field": name }, label, " ");
      out.push(head);
      if (before === after) {
        head.append(h("span", { class: "unchanged" }, "(" + t("diff.unchanged") + ")"));
        out.push(h("table", { class: "diff" }, h("tbody", {}, diffRow("same", after || t("diff.empty")))));
        continue;
      }
      const rows = lineDiff(before ? before.split("\n") : [], after ? after.split("\n") : []);
      out.push(h("table", { class: "diff", "data-field": name }, h("tbody", {}, ...rows.map(([kind, line]) => diffRow(kind, line)))));
    }
    return out;
  }

  function diffRow(kind, line) {
    return h("tr", { class: kind }, h("td", { class: "mark", "aria-hidden": "true" }), h("td", {},
      kind === "ins" ? h("ins", {}, line) : kind === "del" ? h("del", {}, line) : line));
  }

  // A line diff by longest common subsequence (fields are at most a few hundred lines).
  function lineDiff(a, b) {
    const n = a.length, m = b.length;
    const table = Array.from({ length: n + 1 }, () => new Array(m + 1).fill(0));
    for (let i = n - 1; i >= 0; i--) {
      for (let j = m - 1; j >= 0; j--) {
        table[i][j] = a[i] === b[j] ? table[i + 1][j + 1] + 1 : Math.max(table[i + 1][j], table[i][j + 1]);
      }
    }
    const rows = [];
    let i = 0, j = 0;
    while (i < n && j < m) {
      if (a[i] === b[j]) { rows.push(["same", a[i]]); i++; j++; }
      else if (table[i + 1][j] >= table[i][j + 1]) rows.push(["del", a[i++]]);
      else rows.push(["ins", b[j++]]);
    }
    while (i < n) rows.push(["del", a[i++]]);
    while (j < m) rows.push(["ins", b[j++]]);
    return rows;
  }

  // A captured source, exactly as the evidence names it, and its text one click away
  // (get_source: the content as captured, its place in the capture journal, when). The text
  // is untrusted: only ever put into the page as text.
  function sourceRef(ref) {
    const holder = h("div", { class: "source-body" });
    const toggle = h("button", {
      type: "button", class: "show-source", "aria-expanded": "false", "data-source": ref.source_id,
      onclick: async () => {
        if (toggle.getAttribute("aria-expanded") === "true") {
          holder.replaceChildren(); toggle.setAttribute("aria-expanded", "false"); toggle.textContent = t("evidence.source.show");
          return;
        }
        toggle.setAttribute("aria-expanded", "true"); toggle.textContent = t("evidence.hide");
        holder.replaceChildren(h("p", { class: "muted" }, t("loading")));
        holder.replaceChildren(...await capturedSource(ref));
      },
    }, t("evidence.source.show"));
    return h("span", { class: "source-ref", "data-source": ref.source_id },
      t("evidence.source.label", { name: ref.name }), " ", h("code", {}, ref.source_id), " ", toggle, holder);
  }

  async function capturedSource(ref) {
    let found;
    try {
      found = await api("/v1/sources/get", { scope_id: state.scope, source_id: ref.source_id });
    } catch (error) {
      const gone = error.code === "source_not_found";
      return [alertBox("error", gone ? t("evidence.source.missing") : t("evidence.source.unreadable", { message: error.message }))];
    }
    return [
      h("p", { class: "muted source-meta" }, t(found.flushed ? "evidence.source.meta.flushed" : "evidence.source.meta", { position: found.position, created: found.created_at })),
      h("pre", { class: "exact source-text", "data-source": ref.source_id }, sourceText(found)),
    ];
  }

  // A task result is stored as one line of canonical JSON (its fields sorted, secrets already
  // redacted): shown indented, still as text, so a reviewer can read goal, changes and checks.
  function sourceText(found) {
    if (found.source.name !== "task-result") return found.content;
    try {
      return JSON.stringify(JSON.parse(found.content), null, 2);
    } catch (_) {
      return found.content;
    }
  }

  // A cited task result, shown inline without a click: what was asked, how it ended, the
  // checks run (each output tail collapsed) and the files changed. Every value is stored,
  // untrusted text: only ever put into the page as text (h()).
  function taskResultInline(ref) {
    const holder = h("div", { class: "task-result", "data-source": ref.source_id, "aria-live": "polite" }, h("p", { class: "muted" }, t("loading")));
    (async () => {
      let found;
      let task;
      try {
        found = await api("/v1/sources/get", { scope_id: state.scope, source_id: ref.source_id });
        task = JSON.parse(found.content);
      } catch (error) {
        const gone = error.code === "source_not_found";
        holder.replaceChildren(alertBox("error", gone ? t("evidence.source.missing") : t("evidence.source.unreadable", { message: error.message })));
        return;
      }
      holder.replaceChildren(...taskResultParts(task || {}));
    })();
    return holder;
  }

  function taskResultParts(task) {
    const meta = h("dl", { class: "meta task-meta" });
    const row = (label, field, value) => meta.append(h("dt", {}, label), h("dd", { "data-field": field }, value));
    row(t("task.goal"), "goal", String(task.goal ?? ""));
    row(t("task.outcome"), "outcome", String(task.outcome ?? ""));
    if (task.host) row(t("task.host"), "host", String(task.host));
    const checks = Array.isArray(task.checks) ? task.checks : [];
    const changes = Array.isArray(task.changes) ? task.changes : [];
    const out = [meta];
    out.push(h("p", { class: "task-heading" }, t("task.checks", { count: checks.length })));
    if (checks.length) {
      out.push(h("ul", { class: "task-checks" }, ...checks.map((c) => h("li", { class: "task-check", "data-exit": String(c.exit_status) },
        h("code", { class: "check-command" }, String(c.command ?? "")), " ",
        h("span", { class: "badge " + (c.exit_status === 0 ? "approved" : "rejected"), "data-field": "exit_status" }, t("task.exit", { status: String(c.exit_status) })),
        c.output_tail ? h("details", { class: "check-output" }, h("summary", {}, t("task.output")), h("pre", { class: "exact" }, String(c.output_tail))) : null))));
    }
    out.push(h("p", { class: "task-heading" }, t("task.changes", { count: changes.length })));
    if (changes.length) {
      out.push(h("ul", { class: "task-changes" }, ...changes.map((c) => h("li", { class: "task-change" },
        h("code", { class: "change-path" }, String(c.path ?? "")), " ",
        h("span", { class: "diff-ins" }, "+" + String(c.added ?? 0)), " ",
        h("span", { class: "diff-del" }, "\u2212" + String(c.removed ?? 0))))));
    }
    return out;
  }

  // A Memory reference names a revision of the scope's Memory, not an entry: the link opens
  // the entry version that revision wrote, at its exact citation (the Memory page resolves it
  // with list_memory_changes). The label says which entry that is once it is known.
  function memoryRefLink(ref) {
    const what = h("span", { class: "muted memory-ref-what" });
    const link = h("a", { href: "#/memory/at/" + ref.revision, class: "evidence-memory", "data-revision": ref.revision },
      t("evidence.memory", { revision: ref.revision }));
    (async () => {
      try {
        const change = await memoryChangeAt(ref.revision);
        if (change) what.textContent = " " + t("evidence.memory.wrote", { op: t("history.op." + change.operation), entry: change.entry_id });
      } catch (_) { /* the link still opens the Memory page, which says what went wrong */ }
    })();
    return h("span", {}, link, what);
  }

  async function memoryChangeAt(revision) {
    const found = await api("/v1/memory/changes", { scope_id: state.scope, since_revision: revision - 1, limit: 1 });
    const change = found.changes[0];
    return change && change.revision === revision ? change : null;
  }

  function evidenceSection(candidate) {
    const list = h("ul", { class: "evidence", id: "evidence" });
    for (const ref of candidate.source_refs) {
      const item = h("li", {}, sourceRef(ref));
      if (ref.name === "task-result") item.append(taskResultInline(ref));
      list.append(item);
    }
    for (const ref of candidate.artifact_refs) {
      if (ref.family === "memory") {
        list.append(h("li", {}, memoryRefLink(ref)));
        continue;
      }
      const item = h("li", {}, refText(ref), " ");
      const holder = h("div");
      const toggle = h("button", {
        type: "button", class: "show-ref", "aria-expanded": "false",
        onclick: async () => {
          if (toggle.getAttribute("aria-expanded") === "true") {
            holder.replaceChildren(); toggle.setAttribute("aria-expanded", "false"); toggle.textContent = t("evidence.show");
            return;
          }
          toggle.setAttribute("aria-expanded", "true"); toggle.textContent = t("evidence.hide");
          holder.replaceChildren(h("p", { class: "muted" }, t("loading")));
          holder.replaceChildren(await exactArtifact(ref));
        },
      }, t("evidence.show"));
      item.append(toggle, holder);
      list.append(item);
    }
    return h("section", { "aria-labelledby": "evidence-title" }, h("h3", { id: "evidence-title" }, t("evidence.title")), list);
  }

  async function exactArtifact(ref) {
    const path = { experience: "/v1/experience/get", skill: "/v1/skill/get", handoff: "/v1/handoff/get" }[ref.family];
    if (!path) return h("p", { class: "muted" }, refText(ref));
    try {
      const artifact = await api(path, { scope_id: state.scope, artifact: ref });
      return h("pre", { class: "exact" }, JSON.stringify(artifact.content, null, 2));
    } catch (error) {
      return alertBox("error", t("evidence.unreadable", { message: error.message }));
    }
  }

  function actionsSection(detail, candidate) {
    const version = candidate.version;
    const allowed = can("review");
    const result = h("div", { id: "review-result", "aria-live": "assertive" });
    const reason = h("textarea", { id: "reject-reason", rows: "2", disabled: !allowed, maxlength: "2000" });
    const approve = h("button", { type: "button", class: "primary", id: "approve", disabled: !allowed }, t("review.approve", { version }));
    const reject = h("button", { type: "button", class: "danger", id: "reject", disabled: !allowed }, t("review.reject", { version }));
    const revise = h("button", { type: "button", id: "revise-candidate", disabled: !allowed, "aria-expanded": "false", "aria-controls": "revise-form" }, t("review.revise", { version }));
    const editor = h("div", { id: "revise-holder" });
    const buttons = [approve, reject, revise];
    const decide = async (path, body, done, action) => {
      for (const b of buttons) b.disabled = true;
      result.replaceChildren();
      try {
        const decided = await api(path, { scope_id: state.scope, candidate_id: candidate.candidate_id, expected_version: version, ...body });
        const notice = alertBox("ok", done(decided));
        notice.id = "review-done";
        await loadCandidate(detail, candidate.candidate_id, notice, action === "revise" ? { diffBase: "previous" } : {});
        const list = document.querySelector("section .list");
        if (list) loadCandidates(list, candidate.candidate_id);
      } catch (error) {
        result.replaceChildren(conflictBox(detail, candidate, error, action));
        for (const b of buttons) b.disabled = !allowed;
        const box = result.querySelector(".alert");
        if (box) box.focus();
      }
    };
    approve.addEventListener("click", () => decide("/v1/artifact-candidates/approve", {}, (d) =>
      t("review.approved", { version, family: d.result_artifact.family, id: d.result_artifact.artifact_id, revision: d.result_artifact.revision }), "approve"));
    reject.addEventListener("click", () => {
      if (!reason.value.trim()) {
        result.replaceChildren(alertBox("error", t("review.reason.missing")));
        reason.focus();
        return;
      }
      decide("/v1/artifact-candidates/reject", { decision_reason: reason.value }, () => t("review.rejected", { version }), "reject");
    });
    revise.addEventListener("click", () => {
      if (revise.getAttribute("aria-expanded") === "true") {
        editor.replaceChildren();
        revise.setAttribute("aria-expanded", "false");
        return;
      }
      revise.setAttribute("aria-expanded", "true");
      editor.replaceChildren(reviseForm(candidate, (proposal, note) => decide("/v1/artifact-candidates/revise",
        { proposal, ...(note ? { reason: note } : {}) }, (d) => t("review.revised", { version: d.version, previous: version }), "revise"),
      () => { editor.replaceChildren(); revise.setAttribute("aria-expanded", "false"); revise.focus(); }));
      const first = editor.querySelector("textarea, input");
      if (first) first.focus();
    });
    return h("section", { class: "actions", "aria-label": t("review.actions") },
      allowed ? null : alertBox("warn", t("review.cannot")),
      h("div", { class: "row" }, approve, revise),
      h("div", { class: "reject" }, h("div", { class: "field" }, h("label", { for: "reject-reason" }, t("review.reason")), reason), reject),
      h("div", { class: "revise" }, editor),
      h("div", { class: "result" }, result));
  }

  // The candidate's proposal, every field editable, saved as its next version (the version on
  // screen is the expected one: a stale one is a conflict). Evidence and target carry over.
  function reviseForm(candidate, save, cancel) {
    const version = candidate.version;
    const names = [...(FIELDS[candidate.family] || [])];
    for (const key of Object.keys(candidate.proposal)) if (!names.includes(key)) names.push(key);
    const inputs = {};
    const fields = names.map((name) => {
      const value = candidate.proposal[name];
      const id = "revise-field-" + name;
      const label = DICT.en["field." + name] ? t("field." + name) : name;
      const list = Array.isArray(value);
      const short = candidate.family === "skill" && name === "name";
      const input = short
        ? h("input", { id, name, maxlength: "128", required: true, autocomplete: "off" })
        : h("textarea", { id, name, rows: list || name === "instructions" ? "4" : "2", required: name !== "description", "aria-describedby": list ? id + "-hint" : null });
      input.value = list ? value.join("\n") : value === undefined || value === null ? "" : String(value);
      inputs[name] = { input, list };
      return h("div", { class: "field grow" }, h("label", { for: id }, label), input,
        list ? h("span", { class: "muted", id: id + "-hint" }, t("review.revise.lines")) : null);
    });
    const note = h("input", { id: "revise-note", maxlength: "2000", autocomplete: "off" });
    note.value = candidate.reason || "";
    const form = h("form", {
      id: "revise-form", class: "revise-form", "aria-labelledby": "revise-title",
      onsubmit: (e) => {
        e.preventDefault();
        const proposal = {};
        for (const [name, { input, list }] of Object.entries(inputs)) {
          proposal[name] = list ? input.value.split("\n").map((line) => line.trim()).filter(Boolean) : input.value;
        }
        save(proposal, note.value.trim());
      },
    },
    h("h3", { id: "revise-title" }, t("review.revise.title", { version, next: version + 1 })),
    h("p", { class: "muted" }, t("review.revise.intro", { version })),
    ...fields,
    h("div", { class: "field grow" }, h("label", { for: "revise-note" }, t("review.revise.note")), note),
    h("div", { class: "row" },
      h("button", { type: "submit", class: "primary", id: "revise-save" }, t("review.revise.save", { next: version + 1 })),
      h("button", { type: "button", id: "revise-cancel", onclick: cancel }, t("review.revise.cancel"))));
    form.addEventListener("keydown", (e) => { if (e.key === "Escape") { e.preventDefault(); cancel(); } });
    return form;
  }

  function conflictBox(detail, candidate, error, action) {
    const reload = () => h("button", { type: "button", id: "conflict-reload", onclick: () => loadCandidate(detail, candidate.candidate_id, null, { focus: true }) }, t("conflict.reload"));
    let text = null;
    if (error.code === "candidate_conflict") {
      text = t(action === "revise" ? "conflict.candidate.revise" : "conflict.candidate", { expected: error.details.expected_version, current: error.details.current_version });
    } else if (error.code === "candidate_terminal") {
      text = t("conflict.terminal", { status: t("status." + error.details.status) });
    } else if (error.code === "artifact_conflict") {
      const current = error.details.current;
      text = t("conflict.artifact", { current: current && typeof current === "object" ? current.revision : current });
    }
    if (text === null) {
      const box = alertBox("error", describeError(error));
      box.tabIndex = -1;
      return box;
    }
    const box = h("div", { class: "alert conflict", role: "alert", id: "conflict", tabindex: "-1", "data-code": error.code },
      h("strong", {}, t("conflict.title")), h("p", {}, text), reload());
    return box;
  }

  // -- Memory browser -----------------------------------------------------------------------

  function memoryView(arg) {
    const section = h("section", { "aria-labelledby": "memory-title" }, h("h1", { id: "memory-title", tabindex: "-1" }, t("memory.title")));
    if (needScope(section)) return section;
    const m = state.memory;
    const query = h("input", { id: "memory-query", type: "search", maxlength: "8192", value: m.query });
    const stateSelect = h("select", { id: "memory-state" },
      ...["active", "inactive", "any"].map((s) => h("option", { value: s, selected: m.state === s }, t("memory.filter.state." + s))));
    const kind = h("input", { id: "memory-kind", maxlength: "128", value: m.kind, autocomplete: "off", spellcheck: "false", placeholder: "decision" });
    const tag = h("input", { id: "memory-tag", maxlength: "64", value: m.tag, autocomplete: "off", spellcheck: "false", placeholder: "bootstrap-context", pattern: "[a-z0-9][a-z0-9._\\-]{0,63}" });
    const results = h("div", { id: "memory-results", "aria-live": "polite" });
    const detail = h("div", { id: "entry-detail" });
    const run = () => {
      m.query = query.value.trim();
      m.state = stateSelect.value;
      m.kind = kind.value.trim();
      m.tag = tag.value.trim().toLowerCase();
      results.removeAttribute("data-shown");
      detail.replaceChildren();
      if (m.query) searchMemory(results, detail);
      else listMemory(results, detail);
    };
    stateSelect.addEventListener("change", run);
    section.append(h("form", { class: "row", onsubmit: (e) => { e.preventDefault(); run(); } },
      h("div", { class: "field grow" }, h("label", { for: "memory-query" }, t("memory.search")), query),
      h("div", { class: "field" }, h("button", { type: "submit", class: "primary", id: "memory-run" }, t("memory.run")))));
    section.append(h("form", { class: "row filters", "aria-labelledby": "memory-filters-title", onsubmit: (e) => { e.preventDefault(); query.value = ""; run(); } },
      h("p", { id: "memory-filters-title", class: "muted filters-title" }, t("memory.filters")),
      h("div", { class: "field" }, h("label", { for: "memory-state" }, t("memory.filter.state")), stateSelect),
      h("div", { class: "field" }, h("label", { for: "memory-kind" }, t("memory.filter.kind")), kind),
      h("div", { class: "field" }, h("label", { for: "memory-tag" }, t("memory.filter.tag")), tag),
      h("div", { class: "field" }, h("button", { type: "submit", id: "memory-filter" }, t("memory.filter.apply")))));
    section.append(h("div", { class: "inbox" }, results, detail));
    run();
    const cited = /^at\/(\d+)$/.exec(arg || "");
    if (cited) openCitedRevision(detail, Number(cited[1]));
    return section;
  }

  // Evidence that cites Memory revision N (from the Review Inbox): the entry version that
  // revision wrote, at the exact citation {revision N, entry, version}.
  async function openCitedRevision(detail, revision) {
    detail.replaceChildren(h("p", { class: "muted" }, t("loading")));
    let change;
    try { change = await memoryChangeAt(revision); } catch (error) {
      detail.replaceChildren(alertBox("error", describeError(error)));
      return;
    }
    if (!change) {
      detail.replaceChildren(alertBox("error", t("memory.cited.missing", { revision })));
      return;
    }
    const citation = { memory_ref: { family: "memory", artifact_id: "memory", revision }, entry_id: change.entry_id, entry_version_id: change.entry_version_id };
    const notice = alertBox("warn", t("memory.cited", { revision, op: t("history.op." + change.operation) }));
    notice.id = "entry-cited";
    await loadEntry(detail, citation, notice);
  }

  async function listMemory(results, detail, cursor, table) {
    const m = state.memory;
    const body = { scope_id: state.scope, state: m.state, limit: 50 };
    if (m.kind) body.kind = m.kind;
    if (m.tag) body.tag = m.tag;
    if (cursor) body.cursor = cursor;
    let page;
    try { page = await api("/v1/memory/entries/list", body); } catch (error) {
      results.replaceChildren(alertBox("error", describeError(error)));
      return;
    }
    const filtered = m.kind || m.tag || m.state !== "active";
    if (!table) {
      if (!page.entries.length) {
        results.replaceChildren(h("p", { class: "muted", id: "memory-empty" }, t(filtered ? "memory.nofilter" : "memory.empty")));
        results.dataset.shown = "list";
        return;
      }
      table = h("ul", { class: "candidates", id: "entry-list" });
      const heading = page.memory ? t("memory.revision", { revision: page.memory.revision }) : "";
      results.replaceChildren(h("p", { class: "muted" }, heading, filtered ? " · " + t("memory.filtered") : ""), table);
      results.dataset.shown = "list";
    }
    for (const entry of page.entries) table.append(entryItem(detail, entry.citation, entry.text, entry.kind + " · " + t("memory.state." + entry.state) + (entry.tags.length ? " · #" + entry.tags.join(" #") : "")));
    const old = results.querySelector("button.more");
    if (old) old.remove();
    if (page.next_cursor) results.append(h("button", { type: "button", class: "more", onclick: () => listMemory(results, detail, page.next_cursor, table) }, t("inbox.more")));
  }

  async function searchMemory(results, detail) {
    let found;
    try { found = await api("/v1/memory/search", { scope_id: state.scope, query: state.memory.query, limit: 50 }); } catch (error) {
      results.replaceChildren(alertBox("error", describeError(error)));
      return;
    }
    if (!found.hits.length) { results.replaceChildren(h("p", { class: "muted", id: "memory-empty" }, t("memory.nohits"))); return; }
    const list = h("ul", { class: "candidates", id: "entry-list" });
    for (const hit of found.hits) list.append(entryItem(detail, hit.citation, hit.text, t("memory.hit", { score: hit.score.toFixed(2), by: hit.matched_by })));
    results.replaceChildren(list);
    results.dataset.shown = "search";
  }

  function entryItem(detail, citation, text, meta) {
    return h("li", {}, h("button", {
      type: "button", class: "entry", "data-entry": citation.entry_id,
      onclick: (e) => {
        for (const other of document.querySelectorAll("button.entry[aria-current]")) other.removeAttribute("aria-current");
        e.currentTarget.setAttribute("aria-current", "true");
        loadEntry(detail, citation);
      },
    }, h("span", { class: "title" }, String(text).slice(0, 160)), h("span", { class: "meta" }, meta)));
  }

  async function loadEntry(detail, citation, notice) {
    detail.replaceChildren(h("p", { class: "muted" }, t("loading")));
    let entry;
    try { entry = await api("/v1/memory/entries/get", { scope_id: state.scope, citation }); } catch (error) {
      detail.replaceChildren(alertBox("error", describeError(error)));
      return;
    }
    detail.replaceChildren(entryView(detail, entry, notice));
    const heading = document.getElementById("entry-title");
    if (heading && notice) heading.focus();
  }

  function entryView(detail, entry, notice) {
    const panel = h("article", { class: "panel", "aria-labelledby": "entry-title", "data-entry": entry.citation.entry_id, "data-version": entry.version });
    panel.append(h("h2", { id: "entry-title", tabindex: "-1" }, t("memory.entry"), " ",
      h("span", { class: "badge " + (entry.state === "active" ? "approved" : "rejected") }, t("memory.state." + entry.state)), " ",
      h("span", { class: "muted" }, t("cand.version", { version: entry.version }))));
    if (notice) panel.append(notice);
    const meta = h("dl", { class: "meta" });
    const row = (label, value) => meta.append(h("dt", {}, label), h("dd", {}, value));
    row(t("memory.citation"), h("code", { id: "entry-citation" }, JSON.stringify(entry.citation)));
    row(t("memory.kind"), entry.kind);
    row(t("memory.tags"), entry.tags.length ? entry.tags.join(", ") : "—");
    if (entry.reason) row(t("memory.reason"), entry.reason);
    for (const ref of entry.source_refs) row(t("evidence.title"), sourceRef(ref));
    for (const ref of entry.artifact_refs) row(t("evidence.title"), ref.family === "memory" ? memoryRefLink(ref) : refText(ref));
    panel.append(meta, h("pre", { class: "exact", id: "entry-text" }, entry.text));
    if (entry.state === "active") panel.append(entryActions(detail, entry));
    panel.append(historySection(detail, entry));
    return panel;
  }

  // Every version of the entry, newest first, each at its exact citation.
  function historySection(detail, entry) {
    const list = h("ol", { class: "history", id: "entry-history", reversed: true }, h("li", { class: "muted" }, t("loading")));
    const section = h("section", { "aria-labelledby": "history-title" }, h("h3", { id: "history-title" }, t("history.title")), list);
    const load = async (cursor) => {
      let page;
      try {
        page = await api("/v1/memory/entries/versions", { scope_id: state.scope, entry_id: entry.citation.entry_id, limit: 20, ...(cursor ? { cursor } : {}) });
      } catch (error) {
        list.replaceChildren(h("li", {}, alertBox("error", describeError(error))));
        return;
      }
      if (!cursor) list.replaceChildren();
      for (const version of page.versions) {
        const shown = version.citation.entry_version_id === entry.citation.entry_version_id;
        const span = version.valid_to_revision === null
          ? t("history.current", { from: version.valid_from_revision })
          : t("history.span", { from: version.valid_from_revision, to: version.valid_to_revision });
        const item = h("li", { "data-version": version.version, "aria-current": shown ? "true" : null },
          h("div", { class: "history-head" },
            h("strong", {}, t("cand.version", { version: version.version })), " ",
            h("span", { class: "badge " + (version.state === "active" ? "approved" : "rejected") }, t("history.op." + version.operation)), " ",
            h("span", { class: "muted" }, span, " · ", version.created_at)),
          h("div", { class: "history-text" }, String(version.text).slice(0, 240)),
          version.reason ? h("div", { class: "muted" }, t("memory.reason"), ": ", version.reason) : null,
          h("code", { class: "history-citation" }, JSON.stringify(version.citation)));
        if (!shown) {
          item.append(h("button", {
            type: "button", class: "show-version", "data-version": version.version,
            onclick: () => loadEntry(detail, version.citation, alertBox("warn", t("history.viewing", { version: version.version }))),
          }, t("history.show", { version: version.version })));
        }
        list.append(item);
      }
      const old = section.querySelector("button.more");
      if (old) old.remove();
      if (page.next_cursor) section.append(h("button", { type: "button", class: "more", onclick: () => load(page.next_cursor) }, t("inbox.more")));
    };
    load();
    return section;
  }

  function entryActions(detail, entry) {
    const allowed = can("write");
    const result = h("div", { id: "entry-result", "aria-live": "assertive" });
    const text = h("textarea", { id: "revise-text", rows: "4", maxlength: "8192", disabled: !allowed });
    text.value = entry.text;
    const reason = h("input", { id: "entry-reason", maxlength: "512", disabled: !allowed });
    const revise = h("button", { type: "button", class: "primary", id: "revise", disabled: !allowed }, t("memory.revise"));
    const retire = h("button", { type: "button", class: "danger", id: "retire", disabled: !allowed }, t("memory.retire"));
    const write = async (path, body, done) => {
      revise.disabled = retire.disabled = true;
      result.replaceChildren();
      try {
        const written = await api(path, { scope_id: state.scope, citation: entry.citation, ...body, ...(reason.value.trim() ? { reason: reason.value.trim() } : {}) });
        const notice = alertBox("ok", done(written.entry));
        notice.id = "entry-done";
        await loadEntry(detail, written.entry.citation, notice);
      } catch (error) {
        revise.disabled = retire.disabled = !allowed;
        let box;
        if (error.code === "revision_conflict" || error.code === "memory_entry_inactive") {
          box = h("div", { class: "alert conflict", role: "alert", id: "conflict", tabindex: "-1", "data-code": error.code },
            h("strong", {}, t("conflict.title")), h("p", {}, t("memory.conflict." + error.code)));
        } else {
          box = alertBox("error", error.code === "capability_forbidden" ? t("memory.cannot") : describeError(error));
          box.tabIndex = -1;
        }
        result.replaceChildren(box);
        box.focus();
      }
    };
    revise.addEventListener("click", () => write("/v1/memory/entries/revise", { text: text.value }, (e) => t("memory.revised", { version: e.version })));
    retire.addEventListener("click", () => write("/v1/memory/entries/retire", {}, () => t("memory.retired")));
    return h("section", { class: "actions", "aria-label": t("memory.revise") },
      allowed ? null : alertBox("warn", t("memory.cannot")),
      h("div", { class: "field grow" }, h("label", { for: "revise-text" }, t("memory.text")), text),
      h("div", { class: "field grow" }, h("label", { for: "entry-reason" }, t("memory.reason.input")), reason),
      h("div", { class: "row" }, revise, retire),
      h("div", { class: "result" }, result));
  }

  // -- Pack inspector -----------------------------------------------------------------------

  function packView() {
    const section = h("section", { "aria-labelledby": "pack-title" },
      h("h1", { id: "pack-title", tabindex: "-1" }, t("pack.title")),
      h("p", { class: "muted" }, t("pack.intro")));
    if (needScope(section)) return section;
    const prompt = h("textarea", { id: "pack-prompt", rows: "3", maxlength: "8192", required: true });
    prompt.value = state.pack.prompt;
    const max = h("input", { id: "pack-max", type: "number", min: "512", max: "32768", step: "1", value: state.pack.maxBytes, required: true });
    const output = h("div", { id: "pack-output", "aria-live": "polite" });
    const form = h("form", {
      onsubmit: async (e) => {
        e.preventDefault();
        state.pack.prompt = prompt.value;
        state.pack.maxBytes = Number(max.value);
        output.replaceChildren(h("p", { class: "muted" }, t("loading")));
        try {
          const explained = await api("/v1/context/explain", { scope_id: state.scope, query: prompt.value, max_bytes: state.pack.maxBytes });
          output.replaceChildren(...packResult(explained.pack, state.pack.maxBytes), ...whySection(explained));
        } catch (error) {
          output.replaceChildren(alertBox("error", describeError(error)));
        }
      },
    },
    h("div", { class: "field" }, h("label", { for: "pack-prompt" }, t("pack.prompt")), prompt),
    h("div", { class: "row" },
      h("div", { class: "field" }, h("label", { for: "pack-max" }, t("pack.max")), max),
      h("div", { class: "field" }, h("button", { type: "submit", class: "primary", id: "pack-run" }, t("pack.run")))));
    section.append(form, output);
    return section;
  }

  function packResult(pack, maxBytes) {
    const out = [];
    const percent = maxBytes ? Math.round((pack.content_bytes / maxBytes) * 1000) / 10 : 0;
    out.push(h("p", { id: "pack-status", "data-status": pack.status }, h("strong", {}, t("pack.status." + pack.status))));
    out.push(h("p", { class: "row" },
      h("meter", { id: "pack-meter", min: "0", max: String(maxBytes), value: String(pack.content_bytes), "aria-labelledby": "pack-bytes" }),
      h("span", { id: "pack-bytes", "data-bytes": pack.content_bytes }, t("pack.bytes", { bytes: pack.content_bytes, max: maxBytes, percent }))));
    if (pack.status !== "ready") return out;
    const items = packItems(pack.content);
    if (items.length) {
      const table = h("table", { class: "items", id: "pack-items" },
        h("thead", {}, h("tr", {}, ...["n", "citation", "content", "bytes", "truncated"].map((c) => h("th", { scope: "col" }, t("pack.col." + c))))),
        h("tbody", {}, ...items.map((item, index) => h("tr", {},
          h("td", {}, String(index + 1)),
          h("td", {}, citationText(item.citation)),
          h("td", { class: "content" }, item.content),
          h("td", {}, String(new TextEncoder().encode(item.content).length)),
          h("td", {}, item.truncated ? t("yes") : t("no"))))));
      out.push(h("h2", {}, t("pack.items")), table);
    }
    out.push(h("h2", {}, t("pack.exact")), h("pre", { class: "pack", id: "pack-content", tabindex: "0" }, pack.content));
    return out;
  }

  // Why each candidate was taken, truncated or left out (explain_context; scores are here,
  // never in the pack).
  function whySection(explained) {
    const out = [h("h2", { id: "why-title", tabindex: "-1" }, t("why.title"))];
    const search = explained.memory_search;
    const facts = [
      t("why.mode", { mode: explained.mode }) + (explained.fallback ? " " + t("why.fallback", { code: explained.fallback }) : ""),
      explained.memory_revision ? t("why.revision", { revision: explained.memory_revision }) : t("why.norevision"),
      t("why.memory", { retrieved: search.retrieved, returned: search.returned, limit: search.candidate_limit }),
      t("why.experience", { retrieved: explained.experience_search.retrieved, returned: explained.experience_search.returned, limit: explained.experience_search.candidate_limit }),
      t("why.budget", { max: explained.budget.max_bytes, frame: explained.budget.frame_bytes, cap: explained.budget.item_content_cap }),
    ];
    if (explained.bootstrap_excluded) facts.push(t("why.bootstrap", { count: explained.bootstrap_excluded }));
    if (explained.empty_reason) facts.push(t("why.empty." + explained.empty_reason));
    out.push(h("ul", { class: "why-facts", id: "why-facts" }, ...facts.map((f) => h("li", {}, f))));
    if (!explained.candidates.length) {
      out.push(h("p", { class: "muted", id: "why-none" }, t("why.none")));
      return out;
    }
    const columns = ["rank", "candidate", "channel", "score", "floor", "outcome"];
    out.push(h("table", { class: "items why", id: "why-table" },
      h("caption", { class: "muted" }, t("why.caption")),
      h("thead", {}, h("tr", {}, ...columns.map((c) => h("th", { scope: "col" }, t("why.col." + c))))),
      h("tbody", {}, ...explained.candidates.map((c) => h("tr", { "data-outcome": c.outcome, "data-family": c.family, "data-entry": c.citation.entry_id || (c.citation.artifact_ref || {}).artifact_id },
        h("td", {}, c.search_rank === null ? "—" : String(c.search_rank)),
        h("td", { class: "content" }, h("div", {}, citationText(c.citation)), h("div", { class: "muted" }, c.preview)),
        h("td", {}, channelText(c)),
        h("td", {}, scoreText(c)),
        h("td", {}, floorText(c)),
        h("td", { class: "outcome" }, h("span", { class: "badge " + outcomeClass(c.outcome) }, t("why.outcome." + c.outcome)), " ", outcomeDetail(c)))))));
    return out;
  }

  function channelText(c) {
    const parts = [];
    if (c.matched_by) parts.push(c.matched_by);
    if (c.lexical && c.lexical.rank) parts.push(t("why.lexrank", { rank: c.lexical.rank }));
    if (c.vector) parts.push(t("why.vector", { rank: c.vector.rank, similarity: c.vector.similarity.toFixed(3) }));
    return parts.length ? parts.join(" · ") : "—";
  }

  function scoreText(c) {
    if (c.score !== null) return c.score.toFixed(3);
    if (c.lexical && c.lexical.score !== null) return c.lexical.score.toFixed(3);
    return "—";
  }

  function floorText(c) {
    const cleared = c.floor === "cleared";
    const head = h("span", { class: "badge " + (cleared ? "approved" : "rejected") }, t(cleared ? "why.floor.cleared" : "why.floor.below"));
    if (!c.lexical) return head;
    const l = c.lexical;
    return h("span", {}, head, " ", h("span", { class: "muted" }, t("why.floor.numbers", {
      content: l.content.toFixed(1), content_required: l.content_required.toFixed(1),
      evidence: l.evidence.toFixed(1), evidence_required: l.evidence_required.toFixed(1),
    })));
  }

  function outcomeClass(outcome) {
    if (outcome === "taken") return "approved";
    if (outcome === "truncated") return "pending";
    return "rejected";
  }

  function outcomeDetail(c) {
    if (c.outcome === "taken") return t("why.detail.taken", { position: c.pack_position, bytes: c.content_bytes });
    if (c.outcome === "truncated") return t("why.detail.truncated." + c.truncation, { position: c.pack_position, bytes: c.content_bytes, stored: c.stored_bytes });
    if (c.outcome === "over_budget") return t("why.detail.over_budget", { remaining: c.remaining_bytes });
    if (c.limit) return t("why.limit." + c.limit);
    return "";
  }

  // The JSON line between the pack's markers (spec 04): the items, exactly as injected.
  function packItems(content) {
    const lines = content.split("\n");
    const begin = lines.indexOf("BEGIN_POWERCONTEXT_PREPARED_CONTEXT_V1");
    if (begin < 0 || begin + 1 >= lines.length) return [];
    try { return JSON.parse(lines[begin + 1]).items || []; } catch (_) { return []; }
  }

  function citationText(citation) {
    if (citation.memory_ref) {
      return t("pack.memory", { entry: citation.entry_id, version: citation.entry_version_id, revision: citation.memory_ref.revision });
    }
    if (citation.artifact_ref) return t("pack.experience", { id: citation.artifact_ref.artifact_id, revision: citation.artifact_ref.revision });
    return JSON.stringify(citation);
  }

  // -- Bootstrap ----------------------------------------------------------------------------

  function bootstrapView() {
    const section = h("section", { "aria-labelledby": "bootstrap-title" },
      h("h1", { id: "bootstrap-title", tabindex: "-1" }, t("bootstrap.title")),
      h("p", { class: "muted" }, t("bootstrap.intro")));
    if (needScope(section)) return section;
    const body = h("div", { id: "bootstrap-body", "aria-live": "polite" }, h("p", { class: "muted" }, t("loading")));
    section.append(body);
    (async () => {
      let o;
      try { o = await api("/v1/context/bootstrap/overview", { scope_id: state.scope, receipts: 20, handoffs: 10 }); } catch (error) {
        body.replaceChildren(alertBox("error", describeError(error)));
        return;
      }
      body.replaceChildren(...bootstrapParts(o));
    })();
    return section;
  }

  function bootstrapParts(o) {
    const out = [];
    // References.
    out.push(h("h2", {}, t("bootstrap.references")));
    out.push(o.references.length
      ? h("ol", { id: "bootstrap-references" }, ...o.references.map((r) => h("li", {}, h("code", {}, r))))
      : h("p", { class: "muted", id: "bootstrap-references" }, t("bootstrap.references.none")));
    out.push(h("p", { class: "muted" }, t("bootstrap.references.version", { version: o.references_version, max: o.limits.referenced_scopes })));
    // Tagged entries per participating scope.
    out.push(h("h2", {}, t("bootstrap.tagged")));
    out.push(h("p", { class: "muted" }, t("bootstrap.tagged.intro", { items: o.limits.memory_items, inspected: o.limits.inspected_per_scope })));
    const rows = [];
    for (const scope of o.scopes) {
      const label = h("span", {}, h("code", {}, scope.scope_id), " ", h("span", { class: "muted" }, t("bootstrap.role." + scope.role)));
      if (scope.status !== "read") {
        rows.push(h("tr", { "data-status": scope.status }, h("td", {}, label), h("td", { colspan: "3" }, h("span", { class: "badge rejected" }, t("bootstrap.status." + scope.status)))));
        continue;
      }
      if (!scope.entries.length) {
        rows.push(h("tr", { "data-status": "empty" }, h("td", {}, label), h("td", { colspan: "3", class: "muted" }, t("bootstrap.tagged.none"))));
        continue;
      }
      for (const entry of scope.entries) {
        rows.push(h("tr", { "data-entry": entry.citation.entry_id, "data-eligible": String(entry.eligible) },
          h("td", {}, label.cloneNode(true)),
          h("td", {}, entry.kind),
          h("td", { class: "content" }, String(entry.text).slice(0, 240)),
          h("td", {}, entry.eligible ? h("span", { class: "badge approved" }, t("bootstrap.eligible"))
            : h("span", { class: "badge rejected" }, t("bootstrap.excluded." + entry.excluded)))));
      }
    }
    out.push(h("table", { class: "items", id: "bootstrap-tagged" },
      h("thead", {}, h("tr", {}, ...["scope", "kind", "text", "eligible"].map((c) => h("th", { scope: "col" }, t("bootstrap.col." + c))))),
      h("tbody", {}, ...rows)));
    // Handoffs.
    out.push(h("h2", {}, t("bootstrap.handoff")));
    const handoff = o.handoff;
    const meta = h("dl", { class: "meta", id: "bootstrap-handoff" });
    meta.append(h("dt", {}, t("bootstrap.handoff.head")), h("dd", {}, handoff.head ? t("bootstrap.handoff.revision", { revision: handoff.head.revision }) : "—"));
    meta.append(h("dt", {}, t("bootstrap.handoff.queued")), h("dd", {}, handoff.queued
      ? t("bootstrap.handoff.queued.at", { revision: handoff.queued.revision, at: handoff.queued_at }) : t("bootstrap.handoff.queued.none")));
    out.push(meta);
    if (handoff.revisions.length) {
      const shown = h("div", { id: "handoff-content" });
      out.push(h("ul", { class: "history", id: "handoff-revisions" }, ...handoff.revisions.map((r) => h("li", {},
        h("strong", {}, t("bootstrap.handoff.revision", { revision: r.reference.revision })), " ",
        h("span", { class: "muted" }, t("bootstrap.disposition." + r.disposition), " · ", r.created_at), " ",
        h("button", { type: "button", class: "show-handoff", "data-revision": r.reference.revision, onclick: async () => {
          shown.replaceChildren(h("p", { class: "muted" }, t("loading")));
          try {
            const found = await api("/v1/handoff/get", { scope_id: state.scope, artifact: r.reference });
            shown.replaceChildren(h("h3", {}, t("bootstrap.handoff.revision", { revision: r.reference.revision })), h("pre", { class: "exact" }, JSON.stringify(found.content, null, 2)));
          } catch (error) {
            shown.replaceChildren(alertBox("error", describeError(error)));
          }
        } }, t("bootstrap.handoff.show"))))), shown);
    }
    // Receipts (no content is stored in a receipt).
    out.push(h("h2", {}, t("bootstrap.receipts")));
    out.push(h("p", { class: "muted" }, t("bootstrap.receipts.intro")));
    if (!o.receipts.length) {
      out.push(h("p", { class: "muted", id: "bootstrap-receipts" }, t("bootstrap.receipts.none")));
      return out;
    }
    out.push(h("table", { class: "items", id: "bootstrap-receipts" },
      h("thead", {}, h("tr", {}, ...["created", "integration", "state", "bytes", "items", "mine"].map((c) => h("th", { scope: "col" }, t("bootstrap.rcol." + c))))),
      h("tbody", {}, ...o.receipts.map((r) => h("tr", { "data-state": r.state },
        h("td", {}, r.created_at),
        h("td", {}, r.integration, " · ", r.lifecycle),
        h("td", {}, h("span", { class: "badge " + (r.state === "injected" ? "approved" : r.state === "pending" ? "pending" : "rejected") }, t("bootstrap.state." + r.state))),
        h("td", {}, r.content_bytes === null ? "—" : String(r.content_bytes)),
        h("td", { class: "content" }, r.items.length ? h("details", {}, h("summary", {}, t("bootstrap.items", { count: r.items.length })),
          h("ul", {}, ...r.items.map((item) => h("li", {}, item.kind === "memory" ? citationText(item.citation) : refText(item.citation.artifact_ref),
            item.truncated ? " (" + t("pack.col.truncated").toLowerCase() + ")" : "")))) : "—",
          r.withheld ? h("p", { class: "muted withheld" }, t("bootstrap.withheld", { count: r.withheld })) : null),
        h("td", {}, r.mine ? t("yes") : t("no")))))));
    return out;
  }

  // -- Activity -----------------------------------------------------------------------------

  const ACTIVITY_COLUMNS = ["prompts_captured", "flush_runs", "sources_flushed", "entries_from_flush", "remembered", "revised", "retired",
    "bootstrap_injected", "bootstrap_failed", "bootstrap_skipped", "bootstrap_pending",
    "packs_ready", "packs_no_match", "packs_no_memory", "packs_budget"];

  function activityView() {
    const section = h("section", { "aria-labelledby": "activity-title" },
      h("h1", { id: "activity-title", tabindex: "-1" }, t("activity.title")),
      h("p", { class: "muted" }, t("activity.intro")));
    if (needScope(section)) return section;
    const days = h("select", { id: "activity-days" }, ...[7, 14, 30, 90].map((d) => h("option", { value: String(d), selected: state.activity.days === d }, t("activity.days", { days: d }))));
    const body = h("div", { id: "activity-body", "aria-live": "polite" });
    const load = async () => {
      state.activity.days = Number(days.value);
      body.replaceChildren(h("p", { class: "muted" }, t("loading")));
      let a;
      try {
        a = await api("/v1/activity/get", { scope_id: state.scope, days: state.activity.days, utc_offset_minutes: -new Date().getTimezoneOffset() });
      } catch (error) {
        body.replaceChildren(alertBox("error", describeError(error)));
        return;
      }
      body.replaceChildren(...activityParts(a));
    };
    days.addEventListener("change", load);
    const refresh = h("button", { type: "button", id: "activity-refresh", onclick: load }, t("activity.refresh"));
    section.append(h("div", { class: "row" }, h("div", { class: "field" }, h("label", { for: "activity-days" }, t("activity.window")), days), refresh), body);
    load();
    return section;
  }

  const ACTIVITY_GROUPS = [
    ["capture", ["prompts_captured", "flush_runs", "sources_flushed", "entries_from_flush"]],
    ["writes", ["remembered", "revised", "retired"]],
    ["bootstrap", ["bootstrap_injected", "bootstrap_failed", "bootstrap_skipped", "bootstrap_pending"]],
    ["recall", ["packs_ready", "packs_no_match", "packs_no_memory", "packs_budget"]],
  ];

  function activityParts(a) {
    const out = [];
    out.push(h("h2", {}, t("activity.totals", { days: a.days.length })));
    out.push(h("div", { class: "stats", id: "activity-totals" }, ...ACTIVITY_COLUMNS.map((name) => h("div", { class: "stat" },
      h("span", { class: "value", "data-count": name }, String(a.totals[name])), h("span", { class: "label" }, t("activity.col." + name))))));
    const now = h("dl", { class: "meta", id: "activity-now" });
    now.append(h("dt", {}, t("activity.capture")), h("dd", {}, t("activity.capture.text", a.capture)));
    now.append(h("dt", {}, t("activity.memory")), h("dd", {}, t("activity.memory.text", { revision: a.memory.revision || 0, active: a.memory.active, retired: a.memory.retired })));
    out.push(h("h2", {}, t("activity.now")), now);
    out.push(h("h2", {}, t("activity.proposers")));
    out.push(h("table", { class: "items", id: "activity-proposers" },
      h("caption", { class: "muted" }, t("activity.proposers.caption")),
      h("thead", {}, h("tr", {}, ...["proposer", "proposed", "approved", "rejected"].map((c) => h("th", { scope: "col" }, t("activity.prcol." + c))))),
      h("tbody", {}, ...(a.distillers || []).map((d) => h("tr", { "data-proposed-by": d.proposed_by },
        h("th", { scope: "row" }, t("proposer." + d.proposed_by)),
        ...["proposed", "approved", "rejected"].map((c) => h("td", { "data-count": c }, String(d[c]))))))));
    const peak = Math.max(1, ...a.days.map((d) => d.prompts_captured));
    out.push(h("h2", {}, t("activity.byday")));
    out.push(h("div", { class: "scroll" }, h("table", { class: "items activity", id: "activity-days-table" },
      h("caption", { class: "muted" }, t("activity.caption", { offset: a.utc_offset_minutes })),
      h("thead", {},
        h("tr", {}, h("td", {}), ...ACTIVITY_GROUPS.map(([group, names]) => h("th", { scope: "colgroup", colspan: String(names.length), class: "group" }, t("activity.group." + group)))),
        h("tr", {}, h("th", { scope: "col" }, t("activity.col.day")), ...ACTIVITY_COLUMNS.map((c) => h("th", { scope: "col" }, t("activity.short." + c))))),
      h("tbody", {}, ...a.days.slice().reverse().map((d) => h("tr", { "data-day": d.day },
        h("th", { scope: "row" }, d.day),
        ...ACTIVITY_COLUMNS.map((c) => h("td", { "data-count": c }, c === "prompts_captured"
          ? h("span", { class: "bar" }, h("meter", { min: "0", max: String(peak), value: String(d[c]), "aria-label": t("activity.col." + c) }), " ", String(d[c]))
          : String(d[c])))))))));
    out.push(h("p", { class: "muted", id: "activity-recall-note" }, t("activity.recall.note")));
    out.push(h("h2", {}, t("activity.packs")));
    out.push(h("p", { class: "muted" }, t("activity.packs.intro", { since: a.packs.since })));
    out.push(a.packs.counts.length
      ? h("table", { class: "items", id: "activity-packs" },
        h("thead", {}, h("tr", {}, ...["operation", "status", "reason", "mode", "count"].map((c) => h("th", { scope: "col" }, t("activity.pcol." + c))))),
        h("tbody", {}, ...a.packs.counts.map((p) => h("tr", { "data-operation": p.operation, "data-status": p.status },
          h("td", {}, p.operation), h("td", {}, p.status), h("td", {}, p.reason ? t("activity.reason." + p.reason) : "—"), h("td", {}, p.mode || "—"), h("td", {}, String(p.count))))))
      : h("p", { class: "muted", id: "activity-packs" }, t("activity.packs.none")));
    out.push(h("h2", {}, t("activity.emb")), embeddingsPanel(a.embeddings));
    return out;
  }

  // The semantic channel's progress (the daemon's, every scope): counts, the worker's state
  // and a failure's kind; "off" is shown, not hidden.
  function embeddingsPanel(e) {
    const panel = h("dl", { class: "meta", id: "activity-embeddings", "data-state": e.state });
    const row = (key, field, value) => panel.append(h("dt", {}, t("activity.emb." + key)), h("dd", { "data-field": field }, value));
    row("state", "state", e.state === "failing" ? t("activity.emb.state.failing", { error: e.error || "?" }) : t("activity.emb.state." + e.state));
    if (e.state === "off") return panel;
    row("pending", "pending", String(e.pending) + (e.pending_capped ? "+" : ""));
    row("vectors", "vectors", String(e.vectors));
    row("model", "model", e.model);
    row("last", "last_round", e.last_round || "—");
    return panel;
  }

  start();
})();
