// Inbox: the pending sessions of a store as a table; pick one, Open shows the widget that
// decides it below (the `detail` trait); Refresh reads the store again.

function render({ model, el, host }) {
  const ctx = mount(model, el, "inbox");
  const table = h("div", { class: "inbox-table" });
  const problems = h("div", { class: "inbox-problems" });  // unreadable rows, stuck sessions
  const select = h("select");
  const picker = h("label", { class: "im-field inbox-picker" }, h("span", { class: "im-label", text: "Session" }), select);
  const open = button("inbox-open", "Open", "primary");
  const refresh = button("inbox-refresh", "Refresh", "plain");
  const hint = h("div", { class: "im-hint-box" });
  const status = h("div", { class: "inbox-status" });
  const detail = h("div", { class: "inbox-detail" });
  ctx.root.append(table, problems, h("div", { class: "im-row" }, picker, open, refresh), hint, status, detail);
  let options = "";
  let chosenByPython = null;
  const draw = () => {
    setHTML(table, model.get("table"));
    setHTML(problems, model.get("problems"));
    const items = model.get("options") || [];
    const now = JSON.stringify(items);
    const selected = model.get("selected") || "";
    const keep = select.value;
    if (now !== options) {
      options = now;
      select.replaceChildren(...items.map((o) => h("option", { value: o.id, text: o.label })));
      // what the person picked stays picked while it is still listed
      select.value = items.some((o) => o.id === keep) ? keep : selected;
    }
    if (selected !== chosenByPython) {
      chosenByPython = selected;
      if (selected) select.value = selected;
    }
    open.disabled = !items.length || ctx.locked();
    refresh.disabled = ctx.locked();
    select.disabled = ctx.dead;
    setHTML(hint, model.get("hint"));
    setHTML(status, model.get("status"));
  };
  open.addEventListener("click", () => ctx.send("open", { session_id: select.value }));
  refresh.addEventListener("click", () => ctx.send("refresh", {}));
  ctx.watch(["table", "problems", "options", "selected", "hint", "status", "busy"], draw);
  child(ctx, host, detail, "detail");
  return ctx.done();
}

export default { render };
