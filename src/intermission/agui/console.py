r"""The reviewer console: one self-contained page (no build step, no CDN, no innerHTML).

It asks once for the bearer token (when the server has auth) and shows who that signs you
in as (``GET /whoami``): that principal decides. A server without auth asks for a reviewer
name instead, recorded as asserted. It polls ``GET /interrupts`` (a link to
``/#thread=ID&interrupt=ID``, as notifications send, lists that thread only and marks that
interrupt), shows what each approval still needs (a quorum's approvals so far), and
decides through the AG-UI run endpoint itself (a ``resume`` covering every open interrupt
of the thread). An interrupt that disappears shows who took it (``GET /threads/{id}``); a
refused decision shows the server's ``RUN_ERROR``, which names who won or why it was
refused. Each card names its session's version (``ops@1``); one whose version this
server does not serve says so ("waiting for ops@1, not served here") and its buttons are
disabled: the server serving that version decides it (R62, blue-green). Threads whose stored row cannot be read are listed apart (id and why), never
hiding the others; threads stuck on an effect of unknown outcome are listed as needing a
person, with buttons that record what the reviewer found (``POST /threads/{id}/effects``).
Pages are followed by their ``next`` cursor, which a thread that stays open never moves
past, so a card stays until its thread is decided. Everything shown is set as text, bidi
controls as visible escapes (U+202E shows as the text \u202e).
"""

from __future__ import annotations

__all__ = ["CONSOLE_HTML"]

CONSOLE_HTML = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>intermission: reviewer console</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1.5rem;max-width:60rem;color:#222}
h1{font-size:1.3rem}.card{border:1px solid #bbb;border-radius:6px;padding:.8rem;margin:.6rem 0}
.card.taken{background:#f3f3f3;color:#555}.meta{color:#666;font-size:12px}
pre{background:#f7f7f7;padding:.4rem;white-space:pre-wrap;word-break:break-word}
textarea{width:100%;box-sizing:border-box}.err{color:#a00}.ok{color:#070}
button{margin-right:.4rem}.card.focus{border:2px solid #06c}
.meta,pre,input,[data-testid=message],[data-testid=outcome]{unicode-bidi:isolate}#login{border:1px solid #888;padding:.8rem;border-radius:6px}
</style></head><body>
<h1>Open interrupts</h1>
<form id="login" data-testid="login">
<label>Reviewer name (a server without sign-in) <input id="reviewer" data-testid="reviewer" maxlength="200"></label>
<label>Token <input id="token" data-testid="token" type="password" autocomplete="off"></label>
<button type="submit" data-testid="start">Start reviewing</button>
<span id="login-msg" data-testid="login-msg" class="err"></span>
</form>
<p id="whoami" data-testid="whoami"></p>
<p id="status" class="meta" data-testid="status"></p>
<div id="stuck" data-testid="stuck-list"></div>
<div id="unreadable" data-testid="unreadable-list"></div>
<div id="list" data-testid="list"></div>
<script>
"use strict";
const S = {reviewer: "", typed: "", token: "", me: null, cards: new Map(), staged: new Map(),
           stuck: new Map(), focused: false};
// a notification's link opens one interrupt: #thread=ID&interrupt=ID (only that thread is listed)
function focus() { const f = new URLSearchParams(location.hash.slice(1)); return {thread: f.get("thread"), interrupt: f.get("interrupt")}; }
const $ = (id) => document.getElementById(id);
function el(tag, attrs, ...kids) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) n.setAttribute(k, v);
  for (const k of kids) n.append(typeof k === "string" ? document.createTextNode(shown(k)) : k);
  return n;
}
// bidi embeddings, overrides and isolates would let a name or an argument be drawn reversed
// (a spoofed reviewer): everything shown has them as visible escapes, as the widgets do
function shown(v) {
  return String(v).replace(/[\\u202a-\\u202e\\u2066-\\u2069]/g,
                           (c) => "\\\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
}
function headers(extra) {
  const h = Object.assign({}, extra || {});
  if (S.token) h["Authorization"] = "Bearer " + S.token;
  return h;
}
function when(ms) { return ms ? new Date(ms).toISOString().replace("T", " ").slice(0, 19) + " UTC" : ""; }
async function getJSON(path) {
  const r = await fetch(path, {headers: headers()});
  if (r.status === 401) throw new Error("the server refused the token");
  if (!r.ok) throw new Error("HTTP " + r.status);
  return r.json();
}
function key(item) { return item.threadId + "\\u0000" + item.interrupt.id; }
function render(item) {
  const i = item.interrupt, k = key(item);
  const card = el("div", {"class": "card", "data-testid": "interrupt", "data-thread": item.threadId,
                          "data-interrupt": i.id});
  card.append(el("div", {"class": "meta"}, "thread " + item.threadId + " · agent " + (item.agent || "?")
                 + (item.version ? " · " + item.version : "")
                 + " · " + i.reason + (i.expiresAt ? " · expires " + i.expiresAt : "")));
  card.append(el("div", {"data-testid": "message"}, i.message || ""));
  const meta = (i.metadata || {}).intermission || {};
  if (meta.args !== undefined) card.append(el("pre", {"data-testid": "args"}, JSON.stringify(meta.args, null, 2)));
  if (meta.reason) card.append(el("div", {"class": "meta"}, meta.reason));
  const progress = el("div", {"data-testid": "progress"}, meta.progress || "");
  card.append(progress);
  const reason = el("textarea", {"rows": "2", "placeholder": "reason (required to reject)", "data-testid": "reason"});
  const edit = el("textarea", {"rows": "3", "placeholder": "edited arguments (JSON object, optional)", "data-testid": "edit"});
  const out = el("div", {"data-testid": "outcome"});
  const approve = el("button", {"type": "button", "data-testid": "approve"}, "Approve");
  const reject = el("button", {"type": "button", "data-testid": "reject"}, "Reject");
  approve.onclick = () => {
    let payload = {approved: true};
    if (edit.value.trim()) {
      try { const v = JSON.parse(edit.value); if (!v || typeof v !== "object" || Array.isArray(v)) throw 0; payload.editedArgs = v; }
      catch (e) { out.className = "err"; out.textContent = shown("edited arguments must be a JSON object"); return; }
    }
    decide(item, payload, out);
  };
  reject.onclick = () => {  // a reason, unless the approval's policy says none is needed
    const needs = !(meta.policy && meta.policy.reason_to_reject === false);
    if (needs && !reason.value.trim()) { out.className = "err"; out.textContent = shown("a rejection needs a reason"); return; }
    decide(item, reason.value.trim() ? {approved: false, reason: reason.value.trim()} : {approved: false}, out);
  };
  const controls = el("div", {"data-testid": "controls"}, approve, reject);
  if (item.served === false) {  // its version runs on another server (blue-green): not here
    const why = item.waiting || ("waiting for " + (item.version || item.agent || "?") + ", not served here");
    card.setAttribute("data-served", "false");
    for (const b of [approve, reject]) { b.disabled = true; b.title = shown(why); }
    card.append(el("div", {"class": "err", "data-testid": "version-note"}, why));
  }
  if (i.reason === "tool_call") card.append(edit);
  card.append(reason, controls, out);
  S.cards.set(k, {card, item, out, controls, progress});
  return card;
}
function taken(entry, text, cls) {
  entry.card.classList.add("taken");
  entry.card.setAttribute("data-state", "taken");
  entry.controls.remove();
  entry.out.className = cls || "";
  entry.out.textContent = shown(text);
}
async function decide(item, payload, out) {
  const tid = item.threadId;
  const staged = S.staged.get(tid) || new Map();
  staged.set(item.interrupt.id, payload);
  S.staged.set(tid, staged);
  const open = [...S.cards.values()].filter(c => c.item.threadId === tid && !c.card.classList.contains("taken"));
  const waiting = open.filter(c => !staged.has(c.item.interrupt.id));
  if (waiting.length) { out.className = "meta"; out.textContent = shown("staged: decide the other " + waiting.length + " interrupt(s) of this thread to send"); return; }
  S.staged.delete(tid);
  // who decides is the signed-in principal; a name typed here is only a display note
  const md = S.typed ? {via: "console", reviewer: S.typed} : {via: "console"};
  const resume = open.map(c => ({interruptId: c.item.interrupt.id, status: "resolved",
                                 payload: staged.get(c.item.interrupt.id), metadata: md}));
  const body = {threadId: tid, runId: "console-" + crypto.randomUUID(), messages: [], state: {},
                tools: [], context: [], forwardedProps: {}, resume};
  out.className = "meta"; out.textContent = shown("sending…");
  let text = "";
  try {
    const r = await fetch("/agents/" + encodeURIComponent(item.agent || ""), {method: "POST",
      headers: headers({"Content-Type": "application/json", "Accept": "text/event-stream"}), body: JSON.stringify(body)});
    text = await r.text();
    if (!r.ok) throw new Error("HTTP " + r.status + ": " + text.slice(0, 300));
  } catch (e) { for (const c of open) { c.out.className = "err"; c.out.textContent = shown(String(e.message || e)); } return; }
  const events = text.split("\\n").filter(l => l.startsWith("data: ")).map(l => { try { return JSON.parse(l.slice(6)); } catch (e) { return {}; } });
  const error = events.find(e => e.type === "RUN_ERROR");
  const fin = events.find(e => e.type === "RUN_FINISHED");
  const still = new Map(((fin && fin.outcome && fin.outcome.interrupts) || []).map(i => [i.id, i]));
  for (const c of open) {
    const mine = staged.get(c.item.interrupt.id);
    const again = still.get(c.item.interrupt.id);
    if (error) { taken(c, "not recorded: " + error.message, "err"); c.card.setAttribute("data-state", "refused"); }
    else if (again) {  // a quorum's vote: recorded, the approval waits for the others
      const need = ((again.metadata || {}).intermission || {}).progress || "";
      taken(c, (mine.approved ? "approved" : "rejected") + " by you (" + S.reviewer + "); " + need, "ok");
      c.card.setAttribute("data-state", "voted");
      c.progress.textContent = shown(need);
    }
    else taken(c, (mine.approved ? "approved" : "rejected") + " by you (" + S.reviewer + ")"
               + (fin && fin.outcome && fin.outcome.type === "interrupt" ? "; the run paused again" : "; the run went on"), "ok");
  }
}
function renderStuck(item) {
  const k = item.threadId + "\u0000" + item.key;
  const card = el("div", {"class": "card", "data-testid": "stuck", "data-thread": item.threadId, "data-key": item.key});
  card.append(el("div", {"class": "meta"}, "needs a person · thread " + item.threadId + " · agent " + (item.agent || "?") + " · " + item.status));
  card.append(el("div", {"data-testid": "why"}, item.why));
  const result = el("textarea", {"rows": "2", "placeholder": "its result, as JSON (null when it has none)", "data-testid": "result"});
  const out = el("div", {"data-testid": "outcome"});
  const happened = el("button", {"type": "button", "data-testid": "resolve"}, "It happened");
  const notHappened = el("button", {"type": "button", "data-testid": "forget"}, "It did not happen");
  const controls = el("div", {"data-testid": "controls"}, happened, notHappened);
  happened.onclick = () => {
    let value;
    try { value = JSON.parse(result.value.trim() || "null"); }
    catch (e) { out.className = "err"; out.textContent = shown("the result must be JSON"); return; }
    resolveEffect(item, {action: "resolve", result: value}, entry);
  };
  notHappened.onclick = () => resolveEffect(item, {action: "forget"}, entry);
  card.append(result, controls, out);
  const entry = {card, item, out, controls};
  S.stuck.set(k, entry);
  return card;
}
async function resolveEffect(item, payload, entry) {
  entry.out.className = "meta"; entry.out.textContent = shown("sending…");
  // signed in, the principal records it and a name typed here is only a display note, as
  // for decisions; without sign-in the typed name is who records it (as asserted)
  const body = Object.assign({key: item.key, reviewer: S.typed || S.reviewer}, payload);
  let r, data;
  try {
    r = await fetch("/threads/" + encodeURIComponent(item.threadId) + "/effects", {method: "POST",
      headers: headers({"Content-Type": "application/json"}), body: JSON.stringify(body)});
    data = await r.json();
  } catch (e) { entry.out.className = "err"; entry.out.textContent = shown(String(e.message || e)); return; }
  if (!r.ok) { entry.out.className = "err"; entry.out.textContent = shown("not recorded: " + (data.error || ("HTTP " + r.status))); return; }
  entry.card.classList.add("taken"); entry.card.setAttribute("data-state", "resolved"); entry.controls.remove();
  entry.out.className = "ok";
  const notDone = data.reopened ? "recorded as not done: its approval is open again, it runs after a fresh decision"
    : "recorded as not done: it runs again";
  entry.out.textContent = shown((payload.action === "resolve" ? "recorded as done" : notDone)
    + " by you (" + S.reviewer + "); thread " + item.threadId + " is " + data.threadStatus + " and can be resumed");
}
function showUnreadable(list) {
  const box = $("unreadable");
  box.replaceChildren(...list.map(u => el("div", {"class": "card taken", "data-testid": "unreadable", "data-thread": u.threadId},
    "thread " + u.threadId + " cannot be read: " + u.why)));
}
async function refresh() {
  const data = {interrupts: [], unreadable: [], stuck: []};
  try {  // every page: the list is paged (next), never cut short
    let path = "/interrupts";
    for (let pages = 0; path && pages < 1000; pages++) {
      const page = await getJSON(path);
      data.interrupts.push(...page.interrupts);
      data.unreadable.push(...(page.unreadable || []));
      data.stuck.push(...(page.stuck || []));
      path = page.next ? "/interrupts?after=" + encodeURIComponent(page.next) : null;
    }
  }
  catch (e) { $("status").textContent = shown(String(e.message || e)); return; }
  showUnreadable(data.unreadable);
  const stuckNow = new Set();
  for (const item of data.stuck) {
    const k = item.threadId + "\u0000" + item.key; stuckNow.add(k);
    if (!S.stuck.has(k)) $("stuck").append(renderStuck(item));
  }
  for (const [k, entry] of S.stuck) {
    if (stuckNow.has(k) || entry.card.classList.contains("taken")) continue;
    entry.card.classList.add("taken"); entry.card.setAttribute("data-state", "resolved"); entry.controls.remove();
    entry.out.className = "meta"; entry.out.textContent = shown("resolved elsewhere");
  }
  const f = focus();
  if (f.thread) data.interrupts = data.interrupts.filter(x => x.threadId === f.thread);
  const gone = f.interrupt && !data.interrupts.some(x => x.interrupt.id === f.interrupt) ? " (the linked interrupt is no longer open)" : "";
  $("status").textContent = shown((f.thread ? "thread " + f.thread + ": " : "") + data.interrupts.length + " open interrupt(s)" + gone
    + (data.stuck.length ? ", " + data.stuck.length + " effect(s) of unknown outcome" : "")
    + (data.unreadable.length ? ", " + data.unreadable.length + " unreadable thread(s)" : "")
    + ", updated " + when(Date.now()));
  const seen = new Set();
  for (const item of data.interrupts) {
    const k = key(item); seen.add(k);
    if (S.cards.has(k)) {  // what it still needs, as others decide
      const meta = (item.interrupt.metadata || {}).intermission || {};
      S.cards.get(k).progress.textContent = shown(meta.progress || "");
      continue;
    }
    const card = render(item);
    $("list").append(card);
    if (item.interrupt.id === f.interrupt && !S.focused) { card.classList.add("focus"); card.setAttribute("data-focus", "true"); card.scrollIntoView(); S.focused = true; }
  }
  for (const [k, entry] of S.cards) {
    if (seen.has(k) || entry.card.classList.contains("taken")) continue;
    try {
      const t = await getJSON("/threads/" + encodeURIComponent(entry.item.threadId));
      const d = (t.decisions || []).find(x => x.interruptId === entry.item.interrupt.id);
      const who = d && d.timedOut ? "the deadline" : d && d.display && d.display !== d.reviewer ? d.display + " (" + d.reviewer + ")" : (d && d.reviewer) || "an unnamed reviewer";
      taken(entry, d ? "taken: " + (d.approved ? "approved" : "rejected") + " by " + who + " at " + when(d.timeMs)
                     : "no longer open", "meta");
    } catch (e) { taken(entry, "no longer open", "meta"); }
  }
}
$("login").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  S.reviewer = S.typed = $("reviewer").value.trim(); S.token = $("token").value;
  try { await getJSON("/interrupts"); S.me = await getJSON("/whoami"); }
  catch (e) { $("login-msg").textContent = shown(String(e.message || e)); return; }
  if (S.me.authenticated) S.reviewer = S.me.name;  // who decides is who the server signed in
  else if (!S.reviewer) { $("login-msg").textContent = shown("a reviewer name is required (this server does not sign you in)"); return; }
  sessionStorage.setItem("intermission.reviewer", $("reviewer").value.trim());
  sessionStorage.setItem("intermission.token", S.token);
  $("login").hidden = true;
  const roles = (S.me.roles || []).length ? " (" + S.me.roles.join(", ") + ")" : "";
  $("whoami").textContent = shown(S.me.authenticated ? "Signed in as " + S.me.name + roles
                                  : "Reviewing as " + S.reviewer + " (a name you typed: this server does not sign you in)");
  $("status").textContent = shown("reviewing as " + S.reviewer);
  refresh(); setInterval(refresh, 1000);
});
window.addEventListener("hashchange", () => { S.cards.clear(); S.focused = false; $("list").replaceChildren(); if ($("login").hidden) refresh(); });
$("reviewer").value = sessionStorage.getItem("intermission.reviewer") || "";
$("token").value = sessionStorage.getItem("intermission.token") || "";
</script></body></html>
"""
