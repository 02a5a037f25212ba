r"""The reviewer console: one self-contained page (no build step, no CDN, no innerHTML).

It first asks the server what sign-in it needs (``GET /whoami``, answered without
credentials): a server with auth gets a token field only and says who the token signs in
("Signed in as alice (sre)"), that principal decides; a server without asks for a reviewer
name only, recorded as asserted. The sign-in is kept for the tab (``sessionStorage``,
never in the URL) across a reload, until Sign out or Switch reviewer.

It polls ``GET /interrupts`` for the approvals waiting (a link to
``/#thread=ID&interrupt=ID``, as notifications send, lists that thread only and marks that
approval; the hash survives the sign-in), shows what each still needs (a quorum's
approvals so far, live as others vote; a viewer who voted, or who asked for it under a
policy that forbids that, sees why the buttons are off), and decides through the AG-UI
run endpoint itself (a ``resume`` covering every open approval of the thread). An
approval that is decided — here or anywhere — leaves the waiting list for "Recently
decided" (``GET /decided``, ``GET /threads/{id}``'s ``outcomes``): who decided (each
voter), approved or rejected and why, what ran with which arguments, and its result or
error. A refused decision says why in a sentence. Each card names its session's version
(``ops@1``); one whose version this server does not serve says so ("waiting for ops@1,
not served here") and its buttons are disabled: the server serving that version decides
it (R62, blue-green). Threads whose stored row cannot be read are listed apart (id and
why), never hiding the others; threads stuck on an effect of unknown outcome are listed as
needing a person, with buttons that record what the reviewer found
(``POST /threads/{id}/effects``). Pages are followed by their ``next`` cursor. Everything
shown is set as text, bidi controls as visible escapes (U+202E shows as the text \u202e).
"""

from __future__ import annotations

__all__ = ["CONSOLE_HTML"]

CONSOLE_HTML = r"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>intermission: approvals</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1.5rem;max-width:60rem;color:#222}
h1{font-size:1.3rem}h2{font-size:1.1rem;margin-top:1.6rem}
.card{border:1px solid #bbb;border-radius:6px;padding:.8rem;margin:.6rem 0}
.card.taken{background:#f3f3f3;color:#555}.meta{color:#666;font-size:12px}
.card.decided{background:#f6f8fa}.card.decided.rejected{border-left:4px solid #a00}
.card.decided.approved{border-left:4px solid #070}
pre{background:#f7f7f7;padding:.4rem;white-space:pre-wrap;word-break:break-word;margin:.3rem 0}
textarea{width:100%;box-sizing:border-box}.err{color:#a00}.ok{color:#070}
button{margin-right:.4rem}.card.focus{border:2px solid #06c}
.meta,pre,input,[data-testid=message],[data-testid=outcome],[data-testid=verdict],[data-testid=ran],[data-testid=result],[data-testid=answer],[data-testid=whoami]{unicode-bidi:isolate}
#login{border:1px solid #888;padding:.8rem;border-radius:6px}#login label{display:block;margin:.3rem 0}
#who{display:flex;gap:.6rem;align-items:center}[hidden]{display:none !important}
</style></head><body>
<h1>Approvals waiting</h1>
<form id="login" data-testid="login" hidden>
<p id="login-hint" class="meta" data-testid="login-hint"></p>
<label id="token-row" hidden>Token <input id="token" data-testid="token" type="password" autocomplete="off"></label>
<label id="name-row" hidden>Your name <input id="reviewer" data-testid="reviewer" maxlength="200"></label>
<button type="submit" data-testid="start">Sign in</button>
<span id="login-msg" data-testid="login-msg" class="err"></span>
</form>
<div id="who" hidden><span id="whoami" data-testid="whoami"></span>
<button type="button" id="signout" data-testid="signout">Sign out</button>
<button type="button" id="switch" data-testid="switch">Switch reviewer</button></div>
<p id="status" class="meta" data-testid="status"></p>
<div id="stuck" data-testid="stuck-list"></div>
<div id="unreadable" data-testid="unreadable-list"></div>
<div id="list" data-testid="list"></div>
<section id="decided-box" hidden><h2>Recently decided</h2><div id="decided" data-testid="decided-list"></div></section>
<script>
"use strict";
const KEY_TOKEN = "intermission.token", KEY_NAME = "intermission.reviewer";
const S = {mode: null, token: "", typed: "", reviewer: "", me: null, timer: null, gen: 0,
           cards: new Map(), staged: new Map(), stuck: new Map(), decided: new Map(),
           notes: new Map(), nodes: new Map(), focused: false, decidedFocused: false, drawn: ""};
// a notification's link opens one approval: #thread=ID&interrupt=ID (only that thread is listed)
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
  return String(v).replace(/[\u202a-\u202e\u2066-\u2069]/g,
                           (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
}
function say(node, text, cls) { node.className = cls || ""; node.textContent = shown(text); }
// a refusal reads as a sentence: no exception class in front of it
function sentence(text) { return String(text || "").replace(/^\s*[A-Za-z_.]*(Error|Exception):\s*/, ""); }
function headers(extra) {
  const h = Object.assign({}, extra || {});
  if (S.token) h["Authorization"] = "Bearer " + S.token;
  return h;
}
function when(ms) { return ms ? new Date(ms).toISOString().replace("T", " ").slice(0, 19) + " UTC" : ""; }
class Refused extends Error {}
async function getJSON(path) {
  const r = await fetch(path, {headers: headers()});
  if (r.status === 401) throw new Refused("the server no longer accepts your sign-in: sign out and sign in again");
  if (!r.ok) throw new Error("the server answered HTTP " + r.status);
  return r.json();
}
function key(thread, iid) { return thread + "\u0000" + iid; }
function person(p) {  // alice (sre); carol (root) when carol is only a display note of root
  let who = p.display && p.display !== p.name ? p.display + " (" + p.name + ")" : p.name;
  if ((p.roles || []).length) who += " (" + p.roles.join(", ") + ")";
  return who;
}
function people(list) { return list.length < 2 ? list.join("") : list.slice(0, -1).join(", ") + " and " + list[list.length - 1]; }
// ---- who is signed in -------------------------------------------------------------------
async function whoami() {
  const r = await fetch("/whoami", {headers: headers()});
  if (r.status === 401) throw new Refused("the server refused the token");
  if (!r.ok) throw new Error("the server answered HTTP " + r.status);
  return r.json();
}
function showSignIn(message) {
  S.gen++; if (S.timer) clearInterval(S.timer); S.timer = null;
  $("who").hidden = true; $("login").hidden = false;
  const token = S.mode === "token";
  $("token-row").hidden = !token; $("name-row").hidden = token;
  say($("login-hint"), token ? "This server signs reviewers in with a token: the token says who you are."
                             : "This server does not sign reviewers in: give your name (recorded as you typed it).", "meta");
  $("token").value = ""; $("reviewer").value = "";
  say($("login-msg"), message || "", "err");
  (token ? $("token") : $("reviewer")).focus();
}
function start(me) {
  S.me = me; S.reviewer = me.authenticated ? me.name : S.typed;
  $("login").hidden = true; $("who").hidden = false; say($("login-msg"), "", "err");
  const roles = (me.roles || []).length ? " (" + me.roles.join(", ") + ")" : "";
  $("whoami").textContent = shown(me.authenticated ? "Signed in as " + me.name + roles
                                  : "Reviewing as " + S.reviewer + " (a name you typed: this server does not sign you in)");
  say($("status"), "loading the approvals…", "meta");
  S.gen++; refresh(); S.timer = setInterval(refresh, 1000);
}
function signOut(message) {
  sessionStorage.removeItem(KEY_TOKEN); sessionStorage.removeItem(KEY_NAME);
  S.token = ""; S.typed = ""; S.reviewer = ""; S.me = null;
  S.cards.clear(); S.staged.clear(); S.stuck.clear(); S.decided.clear(); S.notes.clear();
  S.focused = false; S.decidedFocused = false; S.drawn = ""; S.nodes.clear();
  for (const id of ["list", "stuck", "unreadable", "decided"]) $(id).replaceChildren();
  $("decided-box").hidden = true; say($("status"), "", "meta");
  showSignIn(message);
}
$("signout").addEventListener("click", () => signOut("You signed out."));
$("switch").addEventListener("click", () => signOut("Sign in as the other reviewer."));
$("login").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  if (S.mode === "token") {
    const t = $("token").value.trim();
    if (!t) { say($("login-msg"), "enter your token", "err"); return; }
    S.token = t;
    let me;
    try { me = await whoami(); }
    catch (e) { S.token = ""; say($("login-msg"), e.message || String(e), "err"); return; }
    if (!me.authenticated) { S.token = ""; say($("login-msg"), "the server refused the token", "err"); return; }
    sessionStorage.setItem(KEY_TOKEN, t);
    start(me);
  } else {
    const n = $("reviewer").value.trim();
    if (!n) { say($("login-msg"), "enter your name (this server does not sign you in)", "err"); return; }
    S.typed = n; sessionStorage.setItem(KEY_NAME, n);
    start(S.me || {authenticated: false, roles: []});
  }
});
async function boot() {
  S.token = sessionStorage.getItem(KEY_TOKEN) || "";
  S.typed = sessionStorage.getItem(KEY_NAME) || "";
  let me;
  try { me = await whoami(); }
  catch (e) {
    if (!(e instanceof Refused)) { say($("status"), "the server cannot be reached: " + (e.message || e), "err"); return; }
    sessionStorage.removeItem(KEY_TOKEN); S.token = "";  // a kept token the server no longer takes
    try { me = await whoami(); } catch (e2) { say($("status"), e2.message || String(e2), "err"); return; }
    S.mode = me.signIn || "token"; S.me = me; showSignIn("Your sign-in was refused: sign in again."); return;
  }
  S.mode = me.signIn || (me.authenticated ? "token" : "name"); S.me = me;
  if (me.authenticated || (S.mode === "name" && S.typed)) start(me);
  else showSignIn("");
}
// ---- approvals waiting ------------------------------------------------------------------
function render(item) {
  const i = item.interrupt, k = key(item.threadId, i.id);
  const card = el("div", {"class": "card", "data-testid": "interrupt", "data-thread": item.threadId,
                          "data-interrupt": i.id});
  card.append(el("div", {"class": "meta"}, "thread " + item.threadId + " · agent " + (item.agent || "?")
                 + (item.version ? " · " + item.version : "")
                 + " · " + String(i.reason || "").replace("_", " ") + (i.expiresAt ? " · decide by " + i.expiresAt : "")));
  card.append(el("div", {"data-testid": "message"}, i.message || ""));
  const meta = (i.metadata || {}).intermission || {};
  if (meta.args !== undefined) card.append(el("pre", {"data-testid": "args"}, JSON.stringify(meta.args, null, 2)));
  if (meta.reason) card.append(el("div", {"class": "meta"}, meta.reason));
  const progress = el("div", {"data-testid": "progress"}, meta.progress || "");
  card.append(progress);
  const reason = el("textarea", {"rows": "2", "placeholder": "reason (required to reject)", "data-testid": "reason"});
  const edit = el("textarea", {"rows": "3", "placeholder": "edited arguments (JSON object, optional)", "data-testid": "edit"});
  const out = el("div", {"data-testid": "outcome"});
  const whyNot = el("div", {"class": "meta", "data-testid": "why-not"});
  const approve = el("button", {"type": "button", "data-testid": "approve"}, "Approve");
  const reject = el("button", {"type": "button", "data-testid": "reject"}, "Reject");
  const entry = {card, item, out, progress, whyNot, approve, reject, voted: false};
  approve.onclick = () => {
    let payload = {approved: true};
    if (edit.value.trim()) {
      try { const v = JSON.parse(edit.value); if (!v || typeof v !== "object" || Array.isArray(v)) throw 0; payload.editedArgs = v; }
      catch (e) { say(out, "edited arguments must be a JSON object", "err"); return; }
    }
    decide(item, payload, out);
  };
  reject.onclick = () => {  // a reason, unless the approval's policy says none is needed
    const needs = !(meta.policy && meta.policy.reason_to_reject === false);
    if (needs && !reason.value.trim()) { say(out, "a rejection needs a reason: write why in the box above", "err"); return; }
    decide(item, reason.value.trim() ? {approved: false, reason: reason.value.trim()} : {approved: false}, out);
  };
  const controls = el("div", {"data-testid": "controls"}, approve, reject);
  entry.controls = controls;
  if (item.served === false) {  // its version runs on another server (blue-green): not here
    const why = item.waiting || ("waiting for " + (item.version || item.agent || "?") + ", not served here");
    card.setAttribute("data-served", "false");
    for (const b of [approve, reject]) { b.disabled = true; b.title = shown(why); }
    card.append(el("div", {"class": "err", "data-testid": "version-note"}, why));
  }
  if (i.reason === "tool_call") card.append(edit);
  card.append(reason, controls, whyNot, out);
  S.cards.set(k, entry);
  viewer(entry, meta);
  return card;
}
// what this viewer may do with it: after their vote, or on an approval they asked for
// under a policy that wants someone else, the buttons are off and a sentence says why
function viewer(entry, meta) {
  if (entry.item.served === false || entry.card.getAttribute("data-state") === "refused") return;
  const me = S.reviewer;
  const mine = (meta.approvals || []).some(a => a.name === me);
  const asked = S.me && S.me.authenticated && meta.requester === me && meta.policy && meta.policy.not_requester;
  let why = "";
  if (mine) why = "approved by you (" + me + "); " + (meta.progress || "waiting for the others");
  else if (asked) why = "you asked for this approval, so someone else must decide it";
  else if (meta.notApprovable) why = meta.notApprovable;
  entry.approve.disabled = Boolean(why); entry.reject.disabled = Boolean(mine || asked);
  if (mine) { entry.voted = true; entry.card.setAttribute("data-state", "voted"); say(entry.out, why, "ok"); say(entry.whyNot, "", "meta"); }
  else { if (asked) entry.card.setAttribute("data-state", "requester"); say(entry.whyNot, why, "meta"); }
}
async function decide(item, payload, out) {
  const tid = item.threadId;
  const staged = S.staged.get(tid) || new Map();
  staged.set(item.interrupt.id, payload);
  S.staged.set(tid, staged);
  const open = [...S.cards.values()].filter(c => c.item.threadId === tid && !c.voted);
  const waiting = open.filter(c => !staged.has(c.item.interrupt.id));
  if (waiting.length) { say(out, "noted: decide the other " + waiting.length + " approval(s) of this request to send them together", "meta"); return; }
  S.staged.delete(tid);
  // who decides is the signed-in principal; a name typed here is only a display note
  const md = S.typed ? {via: "console", reviewer: S.typed} : {via: "console"};
  const resume = open.map(c => ({interruptId: c.item.interrupt.id, status: "resolved",
                                 payload: staged.get(c.item.interrupt.id), metadata: md}));
  const body = {threadId: tid, runId: "console-" + crypto.randomUUID(), messages: [], state: {},
                tools: [], context: [], forwardedProps: {}, resume};
  say(out, "sending…", "meta");
  let text = "";
  try {
    const r = await fetch("/agents/" + encodeURIComponent(item.agent || ""), {method: "POST",
      headers: headers({"Content-Type": "application/json", "Accept": "text/event-stream"}), body: JSON.stringify(body)});
    text = await r.text();
    if (r.status === 401) throw new Error("the server no longer accepts your sign-in: sign out and sign in again");
    if (!r.ok) { let m = text; try { m = JSON.parse(text).error || text; } catch (e) { /* not JSON */ } throw new Error("not recorded: " + sentence(m).slice(0, 300)); }
  } catch (e) { for (const c of open) say(c.out, e.message || String(e), "err"); return; }
  const events = text.split("\n").filter(l => l.startsWith("data: ")).map(l => { try { return JSON.parse(l.slice(6)); } catch (e) { return {}; } });
  const error = events.find(e => e.type === "RUN_ERROR");
  const fin = events.find(e => e.type === "RUN_FINISHED");
  const still = new Map(((fin && fin.outcome && fin.outcome.interrupts) || []).map(i => [i.id, i]));
  for (const c of open) {
    const mine = staged.get(c.item.interrupt.id);
    const again = still.get(c.item.interrupt.id);
    const verb = mine.approved ? "approved" : "rejected";
    if (error) {
      c.card.setAttribute("data-state", "refused"); c.controls.remove();
      say(c.out, "not recorded: " + sentence(error.message), "err");
    } else if (again) {  // a quorum's vote: recorded, the approval waits for the others
      const meta = (again.metadata || {}).intermission || {};
      c.progress.textContent = shown(meta.progress || "");
      viewer(c, meta);
      if (!c.voted) { c.voted = true; c.card.setAttribute("data-state", "voted"); c.approve.disabled = c.reject.disabled = true;
                      say(c.out, verb + " by you (" + S.reviewer + "); " + (meta.progress || ""), "ok"); }
    } else {
      const paused = fin && fin.outcome && fin.outcome.type === "interrupt";
      S.notes.set(key(tid, c.item.interrupt.id), verb + " by you (" + S.reviewer + ")" + (paused ? "; the run paused again" : "; the run went on"));
      say(c.out, verb + " by you (" + S.reviewer + ")", "ok");
      await settle(c);
    }
  }
}
// an approval no longer waiting: its card leaves for "Recently decided", with its outcome
async function settle(entry) {
  const tid = entry.item.threadId, iid = entry.item.interrupt.id, k = key(tid, iid);
  let t = null;
  try { t = await getJSON("/threads/" + encodeURIComponent(tid)); } catch (e) { t = null; }
  const o = t && (t.outcomes || []).find(x => x.interruptId === iid);
  if (o) {
    S.cards.delete(k); entry.card.remove();
    remember(Object.assign({threadId: tid, agent: t.agent, version: t.version}, o), iid === focus().interrupt);
    drawDecided(true);
    return;
  }
  // decided but not applied yet (a recorded decision the run has still to take up), or gone
  const d = t && (t.decisions || []).find(x => x.interruptId === iid);
  const who = d && d.timedOut ? "the deadline" : d && d.display && d.display !== d.reviewer ? d.display + " (" + d.reviewer + ")" : (d && d.reviewer) || "an unnamed reviewer";
  entry.card.classList.add("taken"); entry.card.setAttribute("data-state", "taken"); entry.controls.remove();
  say(entry.out, d ? (d.approved ? "approved" : "rejected") + " by " + who + " at " + when(d.timeMs) + "; the run has not taken it up yet"
                   : "no longer open (it expired, or its request was withdrawn)", "meta");
}
// ---- recently decided -------------------------------------------------------------------
function remember(o, focused) {
  const k = key(o.threadId, o.interruptId);
  if (focused) o.focused = true;
  else if (S.decided.has(k) && S.decided.get(k).focused) o.focused = true;
  S.decided.set(k, o);
  if (S.decided.size > 200) {  // the oldest go
    const old = [...S.decided.entries()].sort((a, b) => (a[1].atMs || 0) - (b[1].atMs || 0));
    for (const [x] of old.slice(0, S.decided.size - 200)) S.decided.delete(x);
  }
}
function verdictLine(o) {
  const who = (o.deciders || []).filter(p => !p.verdict || p.verdict === o.verdict).map(person);
  const by = o.timedOut ? "the deadline" : who.length ? people(who) : "an unnamed reviewer";
  let line = (o.verdict === "approve" ? "Approved by " : "Rejected by ") + by;
  if (o.reason) line += ": " + o.reason;
  else if (o.comment) line += " — " + o.comment;
  return line;
}
function renderDecided(o) {
  const k = key(o.threadId, o.interruptId);
  const card = el("div", {"class": "card decided " + (o.verdict === "approve" ? "approved" : "rejected"),
                          "data-testid": "decided", "data-thread": o.threadId, "data-interrupt": o.interruptId,
                          "data-verdict": o.verdict});
  card.append(el("div", {"data-testid": "verdict"}, verdictLine(o)));
  card.append(el("div", {"class": "meta"}, "decided " + when(o.atMs) + " · thread " + o.threadId + " · agent " + (o.agent || "?")
                 + (o.version ? " · " + o.version : "")));
  if (o.tool) {
    card.append(el("div", {}, "asked to run " + o.tool + " with"));
    card.append(el("pre", {"data-testid": "args"}, JSON.stringify(o.args, null, 2)));
  }
  if (o.verdict !== "approve") card.append(el("div", {"data-testid": "ran"}, "nothing ran: it was rejected"));
  else if (o.ran) {
    const edited = o.editedArgs ? " (arguments edited by the reviewer)" : "";
    card.append(el("div", {"data-testid": "ran"}, "ran " + o.ran.tool + " " + JSON.stringify(o.ran.args) + edited));
    card.append(el("div", {"data-testid": "result", "class": o.ran.error ? "err" : "ok"},
                   o.ran.error ? "error: " + o.ran.error : "result: " + (o.ran.result == null ? "(none)" : o.ran.result)));
  } else if ((o.effects || []).length) {
    for (const f of o.effects) {
      card.append(el("div", {"data-testid": "ran"}, "effect " + f.effect + ": " + f.status));
      card.append(el("div", {"data-testid": "result", "class": f.error ? "err" : "ok"},
                     f.error ? "error: " + f.error : "result: " + JSON.stringify(f.result)));
    }
  } else card.append(el("div", {"data-testid": "ran"}, o.tool ? "it has not run yet" : "approved: the run went on"));
  if (o.answer) card.append(el("div", {"data-testid": "answer", "class": "meta"},
                               (o.answer.abnormal ? "the run ended abnormally: " : "the run finished: ") + o.answer.content));
  card.append(el("div", {"data-testid": "outcome", "class": "ok"}, S.notes.get(k) || ""));
  if (o.focused) { card.classList.add("focus"); card.setAttribute("data-focus", "true"); }
  return card;
}
function drawDecided(force) {
  const f = focus();
  const items = [...S.decided.values()].filter(o => !f.thread || o.threadId === f.thread)
    .sort((a, b) => (b.atMs || 0) - (a.atMs || 0) || String(b.threadId).localeCompare(String(a.threadId))).slice(0, 30);
  // a card is drawn anew only when what it shows changed (a node kept stays put)
  const sig = (o) => JSON.stringify([o.verdict, o.deciders, o.reason, o.comment, o.atMs, o.tool, o.args,
    o.ran, o.effects, o.answer, o.version, Boolean(o.focused), S.notes.get(key(o.threadId, o.interruptId)) || ""]);
  const drawn = items.map(o => key(o.threadId, o.interruptId) + sig(o)).join("\n");
  if (!force && drawn === S.drawn) return;
  S.drawn = drawn;
  const nodes = new Map();
  for (const o of items) {
    const k = key(o.threadId, o.interruptId), had = S.nodes.get(k), now = sig(o);
    nodes.set(k, had && had.sig === now ? had : {sig: now, node: renderDecided(o)});
  }
  S.nodes = nodes;
  const list = [...nodes.values()].map(x => x.node);
  if (list.length !== $("decided").children.length || list.some((n, i) => $("decided").children[i] !== n))
    $("decided").replaceChildren(...list);
  $("decided-box").hidden = items.length === 0;
  const mark = $("decided").querySelector("[data-focus=true]");
  if (mark && !S.decidedFocused) { mark.scrollIntoView(); S.decidedFocused = true; }
}
async function loadDecided(gen) {
  let data;
  try { data = await getJSON("/decided?limit=20"); } catch (e) { return; }
  if (gen !== S.gen) return;
  for (const o of data.decided || []) remember(o, false);
}
// ---- effects of unknown outcome ---------------------------------------------------------
function renderStuck(item) {
  const k = key(item.threadId, item.key);
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
    catch (e) { say(out, "the result must be JSON", "err"); return; }
    resolveEffect(item, {action: "resolve", result: value}, entry);
  };
  notHappened.onclick = () => resolveEffect(item, {action: "forget"}, entry);
  card.append(result, controls, out);
  const entry = {card, item, out, controls};
  S.stuck.set(k, entry);
  return card;
}
async function resolveEffect(item, payload, entry) {
  say(entry.out, "sending…", "meta");
  // signed in, the principal records it and a name typed here is only a display note, as
  // for decisions; without sign-in the typed name is who records it (as asserted)
  const body = Object.assign({key: item.key, reviewer: S.typed || S.reviewer}, payload);
  let r, data;
  try {
    r = await fetch("/threads/" + encodeURIComponent(item.threadId) + "/effects", {method: "POST",
      headers: headers({"Content-Type": "application/json"}), body: JSON.stringify(body)});
    data = await r.json();
  } catch (e) { say(entry.out, e.message || String(e), "err"); return; }
  if (!r.ok) { say(entry.out, "not recorded: " + sentence(data.error || ("HTTP " + r.status)), "err"); return; }
  entry.card.classList.add("taken"); entry.card.setAttribute("data-state", "resolved"); entry.controls.remove();
  const notDone = data.reopened ? "recorded as not done: its approval is open again, it runs after a fresh decision"
    : "recorded as not done: it runs again";
  say(entry.out, (payload.action === "resolve" ? "recorded as done" : notDone)
    + " by you (" + S.reviewer + "); thread " + item.threadId + " is " + data.threadStatus + " and can be resumed", "ok");
}
function showUnreadable(list) {
  $("unreadable").replaceChildren(...list.map(u => el("div", {"class": "card taken", "data-testid": "unreadable", "data-thread": u.threadId},
    "thread " + u.threadId + " cannot be read: " + u.why)));
}
// ---- one poll ---------------------------------------------------------------------------
async function refresh() {
  const gen = S.gen;
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
  catch (e) { if (gen === S.gen) say($("status"), e.message || String(e), "err"); return; }
  if (gen !== S.gen) return;  // signed out meanwhile
  showUnreadable(data.unreadable);
  const stuckNow = new Set();
  for (const item of data.stuck) {
    const k = key(item.threadId, item.key); stuckNow.add(k);
    if (!S.stuck.has(k)) $("stuck").append(renderStuck(item));
  }
  for (const [k, entry] of S.stuck) {
    if (stuckNow.has(k) || entry.card.classList.contains("taken")) continue;
    entry.card.classList.add("taken"); entry.card.setAttribute("data-state", "resolved"); entry.controls.remove();
    say(entry.out, "resolved elsewhere", "meta");
  }
  const f = focus();
  if (f.thread) data.interrupts = data.interrupts.filter(x => x.threadId === f.thread);
  const seen = new Set();
  for (const item of data.interrupts) {
    const k = key(item.threadId, item.interrupt.id); seen.add(k);
    const meta = (item.interrupt.metadata || {}).intermission || {};
    const had = S.cards.get(k);
    if (had) {  // what it still needs, as others vote
      had.item = item; had.progress.textContent = shown(meta.progress || ""); viewer(had, meta);
      continue;
    }
    const card = render(item);
    $("list").append(card);
    if (item.interrupt.id === f.interrupt && !S.focused) { card.classList.add("focus"); card.setAttribute("data-focus", "true"); card.scrollIntoView(); S.focused = true; }
  }
  for (const [k, entry] of [...S.cards]) {
    if (seen.has(k) || entry.card.classList.contains("taken") || entry.card.getAttribute("data-state") === "refused") continue;
    await settle(entry);
  }
  let gone = "";
  if (f.interrupt && !seen.has(key(f.thread, f.interrupt))) {
    const k = key(f.thread, f.interrupt);
    if (!S.decided.has(k) && f.thread) {
      try {
        const t = await getJSON("/threads/" + encodeURIComponent(f.thread));
        for (const o of t.outcomes || []) remember(Object.assign({threadId: f.thread, agent: t.agent, version: t.version}, o), o.interruptId === f.interrupt);
      } catch (e) { /* no such thread: said below */ }
    }
    gone = S.decided.has(k) ? " (the linked approval is no longer open: it was decided, see below)" : " (the linked approval is no longer open)";
  }
  await loadDecided(gen);
  if (gen !== S.gen) return;
  drawDecided(false);
  const n = data.interrupts.length;
  say($("status"), (f.thread ? "thread " + f.thread + ": " : "") + n + (n === 1 ? " approval waiting" : " approvals waiting") + gone
    + (data.stuck.length ? ", " + data.stuck.length + " effect(s) of unknown outcome" : "")
    + (data.unreadable.length ? ", " + data.unreadable.length + " unreadable thread(s)" : "")
    + ", updated " + when(Date.now()), "meta");
}
window.addEventListener("hashchange", () => {
  for (const c of S.cards.values()) c.card.remove();
  S.cards.clear(); S.focused = false; S.decidedFocused = false; S.drawn = "";
  if ($("login").hidden) refresh();
});
boot();
</script></body></html>
"""
