// History: a slider over the session's checkpoints (the graph and timeline as they stood),
// Fork from here (its id and effects), and the fork's widget below (the `opened` trait).

function render({ model, el, host }) {
  const ctx = mount(model, el, "im-history");
  const range = h("input", { type: "range", min: 0, max: 0, step: 1, value: 0 });
  const at = h("output", { class: "history-at" });
  const slider = h("label", { class: "history-slider" }, h("span", { class: "im-label", text: "Checkpoint" }), range, at);
  const label = h("div", { class: "history-label" });
  const graph = h("div", { class: "history-graph" });
  const timeline = h("div", { class: "history-timeline" });
  const forkId = field("history-fork-id", "Fork id");
  const effects = h("select", { class: "history-effects" });
  const fork = button("history-fork", "Fork from here", "primary");
  const hint = h("div", { class: "im-hint-box" });
  const status = h("div", { class: "history-status" });
  const title = h("div", { class: "history-opened-title" });
  const opened = h("div", { class: "history-opened" });
  const slot = h("div", { class: "history-fork-widget" });
  opened.append(title, slot);
  ctx.root.append(
    slider, label, graph, timeline,
    h("div", { class: "im-row" }, forkId.box, h("label", { class: "im-field" }, h("span", { class: "im-label", text: "Effects" }), effects), fork),
    hint, status, opened,
  );
  bindText(ctx, forkId.input, "fork_id");
  let choices = "";
  const indices = () => model.get("indices") || [];
  const draw = () => {
    const kept = indices();
    range.max = String(Math.max(kept.length - 1, 0));
    const pos = kept.indexOf(model.get("index"));
    if (pos >= 0 && document.activeElement !== range) range.value = String(pos);
    at.textContent = kept.length ? String(kept[Number(range.value)] ?? "") : "";
    range.disabled = kept.length < 2 || ctx.dead;
    setHTML(label, model.get("label"));
    setHTML(graph, model.get("graph"));
    setHTML(timeline, model.get("timeline"));
    const now = JSON.stringify(model.get("effect_options") || []);
    if (now !== choices) {
      choices = now;
      effects.replaceChildren(...(model.get("effect_options") || []).map(([key, text]) => h("option", { value: key, text })));
    }
    if (effects.value !== model.get("effects") && document.activeElement !== effects) effects.value = model.get("effects");
    effects.disabled = forkId.input.disabled = ctx.dead;
    fork.disabled = !model.get("can_fork") || ctx.locked();
    setHTML(hint, model.get("hint"));
    setHTML(status, model.get("status"));
    setHTML(title, model.get("opened_title"));
  };
  range.addEventListener("input", () => { at.textContent = String(indices()[Number(range.value)] ?? ""); });
  range.addEventListener("change", () => {
    const index = indices()[Number(range.value)];
    if (index !== undefined) ctx.send("show", { index }, { latest: true });
  });
  fork.addEventListener("click", () => ctx.send("fork", { fork_id: forkId.input.value, effects: effects.value }));
  ctx.watch(["indices", "index", "label", "graph", "timeline", "effects", "effect_options", "can_fork", "busy", "hint", "status", "opened_title"], draw);
  child(ctx, host, slot, "opened");
  return ctx.done();
}

export default { render };
