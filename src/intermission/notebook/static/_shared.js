// intermission's notebook widgets: the toolkit every widget's module starts with. The package
// joins this file and the widget's own file into the one ES module anywidget loads (no CDN,
// no build step). A widget draws its page from the model's traits; a button sends
// {action, seq, ...fields} with model.send, Python handles it and answers {ack: seq}.
// Everything Python puts in an HTML trait was escaped there.

const SLOW_MS = 10000; // no answer by then: say the kernel may be busy, or gone
const DEAD_TEXT =
  "Disconnected: the kernel behind this widget stopped or restarted, so its buttons do " +
  "nothing. Run the cell again for a live widget (after a restart, the cells above it too).";
const SLOW_TEXT =
  "No answer from the kernel yet: it may be busy running a cell. If it restarted, run the " +
  "cell again for a live widget (the cells above it too).";

function h(tag, props, ...kids) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const kid of kids.flat()) if (kid !== null && kid !== undefined) node.append(kid);
  return node;
}

function setHTML(node, value) {
  // only when it changed: a redraw keeps scroll positions and selections
  const html = value || "";
  if (node.__imHTML !== html) {
    node.innerHTML = html;
    node.__imHTML = html;
  }
  node.hidden = !html;
}

function field(cls, label, opts = {}) {
  const input = opts.multiline
    ? h("textarea", { rows: 2, placeholder: opts.placeholder || "" })
    : h("input", { type: opts.type || "text", placeholder: opts.placeholder || "" });
  const box = h("label", { class: `im-field ${cls}` }, h("span", { class: "im-label", text: label }), input);
  return { box, input };
}

function button(cls, label, kind) {
  return h("button", { class: `im-btn im-${kind || "plain"} ${cls}`, type: "button", text: label });
}

function isDark() {
  // marimo marks its dark theme with a class on <html> or <body>; JupyterLab with an attribute
  for (const node of [document.documentElement, document.body]) {
    if (!node) continue;
    const c = node.classList;
    if (c.contains("dark") || c.contains("dark-theme")) return true;
    if (node.dataset.theme === "dark" || node.dataset.jpThemeLight === "false") return true;
  }
  return false;
}

function mount(model, el, cls) {
  // The widget's root (themed, with a banner for a gone kernel) and its context: watch
  // traits, send actions, echo revisions, and clean up when the view goes.
  const root = h("div", { class: `im-root ${cls}`, "data-lm-suppress-shortcuts": "true" });
  const banner = h("div", { class: "im-banner", hidden: true });
  root.append(banner);
  // keys typed in the widget are the widget's: JupyterLab's notebook would take an arrow
  // key to move between cells (and "a" to insert one) instead of moving a slider
  root.addEventListener("keydown", (event) => event.stopPropagation());
  el.append(root);
  const ctx = {
    model, root, dead: false, slow: false, sending: null, draws: [], cleanups: [],
    id: Math.random().toString(36).slice(2), count: 0,
  };
  ctx.locked = () => ctx.dead || ctx.sending !== null || !!model.get("busy");
  ctx.redraw = () => {
    banner.textContent = ctx.dead ? DEAD_TEXT : ctx.slow ? SLOW_TEXT : "";
    banner.hidden = !banner.textContent;
    root.classList.toggle("im-dead", ctx.dead);
    for (const draw of ctx.draws) draw();
  };
  ctx.watch = (names, draw) => {
    let queued = false;
    const later = () => {
      if (queued) return;
      queued = true;
      queueMicrotask(() => { queued = false; draw(); });
    };
    for (const name of names) model.on(`change:${name}`, later);
    ctx.cleanups.push(() => { for (const name of names) model.off(`change:${name}`, later); });
    ctx.draws.push(draw);
    draw();
  };
  ctx.send = (action, fields, opts) => {
    // one action at a time: a double click sends one message (Python ignores a second
    // one too, while the first one's resume runs); with {latest: true} (a slider) the
    // newest one waits for the answer to the one before instead of being dropped
    if (ctx.dead) return false;
    if (ctx.sending !== null) {
      if (opts && opts.latest) ctx.queued = [action, fields];
      return false;
    }
    ctx.count += 1;
    ctx.sending = `${ctx.id}:${ctx.count}`;
    clearTimeout(ctx.timer);
    ctx.timer = setTimeout(() => { ctx.slow = true; ctx.redraw(); }, SLOW_MS);
    ctx.redraw();
    model.send({ ...(fields || {}), action, seq: ctx.sending });
    return true;
  };
  const onMessage = (msg) => {
    if (msg && msg.ack !== undefined && msg.ack === ctx.sending) {
      ctx.sending = null;
      ctx.slow = false;
      clearTimeout(ctx.timer);
      const queued = ctx.queued;
      ctx.queued = null;
      if (queued) ctx.send(queued[0], queued[1]);
      else ctx.redraw();
    }
  };
  model.on("msg:custom", onMessage);
  ctx.cleanups.push(() => { model.off("msg:custom", onMessage); clearTimeout(ctx.timer); });
  watchKernel(ctx);
  watchTheme(ctx);
  ctx.watch(["revision", "busy"], () => echo(ctx));
  ctx.done = () => () => { for (const clean of ctx.cleanups) clean(); root.remove(); };
  return ctx;
}

function echo(ctx) {
  // marimo re-runs the cells reading this widget's value only on a write from the page:
  // once a new revision is drawn, write it back (in Jupyter this is a harmless update)
  const { model } = ctx;
  const revision = model.get("revision");
  if (ctx.dead || model.get("busy") || typeof revision !== "number") return;
  if (revision !== model.get("seen")) {
    model.set("seen", revision);
    model.save_changes();
  }
}

function watchKernel(ctx) {
  // Jupyter's widget manager marks every model of a restarted (or stopped) kernel as no
  // longer connected; the widget then says so instead of looking live. (marimo replaces a
  // widget whose kernel restarted, so there it never goes dead.)
  const { model } = ctx;
  const id = model.get("_mid");
  const manager = model.widget_manager;
  let real = null;
  const check = () => {
    const dead = !!real && real.comm_live === false;
    if (dead !== ctx.dead) {
      ctx.dead = dead;
      ctx.redraw();
    }
  };
  if (id && manager && typeof manager.get_model === "function") {
    Promise.resolve(manager.get_model(id)).then((m) => { real = m; check(); }).catch(() => {});
  }
  const timer = setInterval(check, 1000);
  ctx.cleanups.push(() => clearInterval(timer));
}

function watchTheme(ctx) {
  // Colours come from JupyterLab's --jp-* variables; elsewhere (marimo) the stylesheet
  // defines them itself, light or dark as the page is
  const apply = () => {
    ctx.root.classList.toggle("im-jp", !!document.body && document.body.hasAttribute("data-jp-theme-light"));
    ctx.root.classList.toggle("im-dark", isDark());
  };
  apply();
  const observer = new MutationObserver(apply);
  for (const node of [document.documentElement, document.body]) {
    if (node) observer.observe(node, { attributes: true, attributeFilter: ["class", "data-theme", "data-jp-theme-light"] });
  }
  ctx.cleanups.push(() => observer.disconnect());
}

function bindText(ctx, input, name) {
  // Python's value shows in the field (at first, and whenever Python changes it); what a
  // person types stays in the page until an action sends it
  const { model } = ctx;
  const set = () => {
    const value = model.get(name) || "";
    if (input.value !== value && document.activeElement !== input) input.value = value;
  };
  input.value = model.get(name) || "";
  model.on(`change:${name}`, set);
  ctx.cleanups.push(() => model.off(`change:${name}`, set));
}

function areas(ctx, names) {
  // the HTML areas a decision widget shows under its buttons, in this order
  const classes = {
    hint: "im-hint-box", progress: "im-progress", lost: "im-lost-box", status: "approval-status",
    result: "approval-result", graph: "approval-graph", timeline: "approval-timeline",
    version: "im-version", unserved: "im-unserved",
  };
  const plain = new Set(["progress", "version", "unserved"]); // plain text, hidden when empty
  const nodes = names.map((name) => h("div", { class: classes[name] || `im-${name}` }));
  const draw = () => names.forEach((name, i) => {
    // a gone kernel's widget invites no click: its "waiting for your decision" hint goes
    const value = name === "hint" && ctx.dead ? "" : ctx.model.get(name) || "";
    if (plain.has(name)) {
      nodes[i].textContent = value; // plain text
      nodes[i].hidden = !value;
    } else {
      setHTML(nodes[i], value);
    }
  });
  return { nodes, names, draw };
}

function child(ctx, host, slot, name) {
  // another widget shown inside this one (a trait holding "anywidget:<model id>")
  let current = null;
  let abort = null;
  const draw = () => {
    const ref = ctx.model.get(name) || null;
    if (ref === current) return;
    current = ref;
    if (abort) abort.abort();
    slot.replaceChildren();
    if (!ref) return;
    if (!host || typeof host.getWidget !== "function") {
      slot.append(h("div", { class: "im-hint", text: "This notebook front end cannot show one widget inside another; show it in a cell of its own." }));
      return;
    }
    abort = new AbortController();
    const signal = abort.signal;
    host.getWidget(ref)
      .then((w) => (signal.aborted ? null : w.render({ el: slot, signal })))
      .catch((err) => {
        if (!signal.aborted) slot.append(h("div", { class: "im-error", text: String(err) }));
      });
  };
  ctx.watch([name], draw);
  ctx.cleanups.push(() => { if (abort) abort.abort(); });
}

function whoLine(ctx, input) {
  // Who a decision here records, when the widget knows principals by name (its principal=,
  // or settings.principal): the roles a Reviewer's name holds. A name typed here holds the
  // roles of the principal of that name, none otherwise; a notebook asserts it (no sign-in).
  const node = h("div", { class: "im-who" });
  const draw = () => {
    const known = ctx.model.get("roles") || {};
    const name = input.value.trim();
    if (!Object.keys(known).length || !name) {
      node.textContent = "";
      node.hidden = true;
      return;
    }
    const roles = known[name];
    const held = roles === undefined ? "no roles (a name typed here holds none)"
      : roles.length ? `roles: ${roles.join(", ")}` : "no roles";
    node.textContent = `Decides as ${name} · ${held} · asserted in this notebook, not signed in`;
    node.hidden = false;
  };
  input.addEventListener("input", draw);
  return { node, draw };
}

const NEEDS_REASON = "a rejection needs a reason — write one above";

function whyOff(ctx, offs) {
  // Why the buttons a person cannot use are off, in sentences (the kernel judged them by
  // the rules a click meets: `why_not`); one line per reason, naming its buttons. Nothing
  // while the page is locked (an action runs, the kernel is gone: the page says that).
  const node = h("div", { class: "im-why" });
  const draw = (list) => {
    const shown = new Map();
    for (const [label, btn, why] of list) {
      const said = btn.disabled && !ctx.locked() ? why || "" : "";
      btn.title = said;
      if (!said) continue;
      if (!shown.has(said)) shown.set(said, []);
      shown.get(said).push(label);
    }
    const lines = [...shown].map(([why, labels]) =>
      `${labels.join(" and ")} ${labels.length > 1 ? "are" : "is"} off: ${why}`);
    node.replaceChildren(...lines.map((text) => h("div", { text })));
    node.hidden = !lines.length;
  };
  draw(offs || []);
  return { node, draw };
}

function askViewer(ctx, input) {
  // the Reviewer field names who decides: once it changes, the kernel judges what that
  // person may do (the buttons follow). Sent beside ctx.send's one-at-a-time queue (no
  // seq, no ack): the change fires as the field loses focus to a button, whose click
  // must not be dropped as a second action
  input.addEventListener("change", () => {
    if (!ctx.dead) ctx.model.send({ action: "viewer", reviewer: input.value });
  });
}
