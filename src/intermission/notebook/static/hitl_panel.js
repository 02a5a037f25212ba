// HITLPanel: one row per tool call of the suspended batch (what it does, why it waits, its
// arguments as editable JSON, Approve / Reject / Skip), Reviewer / Comment / Reason,
// Approve all / Reject all, then the session's status, answer and timeline.

function render({ model, el }) {
  const ctx = mount(model, el, "hitl-panel");
  const rowsBox = h("div", { class: "hitl-rows" });
  const empty = h("div", { class: "hitl-empty" });
  const reviewer = field("hitl-reviewer", "Reviewer", { placeholder: "your name" });
  const comment = field("hitl-comment", "Comment", { placeholder: "optional note" });
  const reason = field("hitl-reason", "Reason", { placeholder: "required to reject" });
  const who = whoLine(ctx, reviewer.input);
  const approveAll = button("hitl-approve-all", "Approve all", "approve");
  const rejectAll = button("hitl-reject-all", "Reject all", "reject");
  const resume = button("hitl-resume", "Resume with recorded decisions", "plain");
  // the agent version the session runs on, and why nothing can be decided here if so
  const head = areas(ctx, ["version", "unserved"]);
  const shown = areas(ctx, ["hint", "progress", "lost", "status", "result", "timeline"]);
  ctx.root.append(
    ...head.nodes, rowsBox, empty, reviewer.box, who.node, comment.box, reason.box,
    h("div", { class: "im-buttons" }, approveAll, rejectAll, resume), ...shown.nodes,
  );
  for (const [input, name] of [[reviewer.input, "reviewer"], [comment.input, "comment"], [reason.input, "reason"]]) {
    bindText(ctx, input, name);
  }
  const fields = () => ({
    reviewer: reviewer.input.value, comment: comment.input.value, reason: reason.input.value,
  });
  const rows = new Map(); // call UUID -> its elements
  let order = "";

  const makeRow = (call) => {
    const row = {
      head: h("div", { class: "hitl-row-head" }),
      args: h("textarea", { class: "hitl-args", rows: 3, spellcheck: "false" }),
      state: h("span", { class: "hitl-row-state" }),
      buttons: {},
      fromPython: null,
    };
    for (const [verdict, label] of [["approve", "Approve"], ["reject", "Reject"], ["skip", "Skip"]]) {
      const b = button(`hitl-${verdict}`, label, verdict);
      b.addEventListener("click", () => ctx.send("decide", {
        ...fields(), call_uuid: call.uuid, verdict, args: row.args.value,
      }));
      row.buttons[verdict] = b;
    }
    row.box = h("div", { class: "hitl-row" }, row.head, row.args,
      h("div", { class: "im-buttons" }, ...Object.values(row.buttons), row.state));
    return row;
  };

  const draw = () => {
    const calls = model.get("calls") || [];
    const now = calls.map((c) => c.uuid).join("\n");
    if (now !== order) { // another batch: new rows (edits of the old ones are gone with it)
      order = now;
      rows.clear();
      for (const call of calls) rows.set(call.uuid, makeRow(call));
      rowsBox.replaceChildren(...calls.map((c) => rows.get(c.uuid).box));
    }
    const locked = ctx.locked();
    const hasReason = !!reason.input.value.trim();
    for (const call of calls) {
      const row = rows.get(call.uuid);
      setHTML(row.head, call.head);
      if (row.fromPython !== call.args) { // Python's text (a fresh batch, a decided call)
        row.args.value = call.args;
        row.fromPython = call.args;
      }
      setHTML(row.state, call.state);
      row.state.hidden = false;
      const open = !!call.open && !locked;
      row.args.disabled = !open;
      row.buttons.approve.disabled = !open;
      row.buttons.skip.disabled = !open;
      // a reason to reject, unless the call's policy takes a rejection without one
      row.buttons.reject.disabled = !(open && (hasReason || call.needs_reason === false));
    }
    setHTML(empty, model.get("empty"));
    const batch = !!model.get("can_all") && !locked;
    approveAll.disabled = !batch;
    const needs = model.get("needs_reason") !== false;
    reason.input.placeholder = needs ? "required to reject" : "optional";
    rejectAll.disabled = !(batch && (hasReason || !needs));
    who.draw();
    resume.hidden = !model.get("show_resume");
    resume.disabled = !(model.get("can_resume") && !locked);
    for (const f of [reviewer, comment, reason]) f.input.disabled = ctx.dead;
    head.draw();
    shown.draw();
  };
  // every box as the person left it: approving all approves the arguments shown
  const edits = () => Object.fromEntries([...rows].map(([uuid, row]) => [uuid, row.args.value]));
  approveAll.addEventListener("click", () => ctx.send("all", {
    ...fields(), verdict: "approve", args: edits(),
  }));
  rejectAll.addEventListener("click", () => ctx.send("all", { ...fields(), verdict: "reject" }));
  resume.addEventListener("click", () => ctx.send("resume", fields()));
  reason.input.addEventListener("input", draw);
  ctx.watch(["calls", "empty", "can_all", "can_resume", "show_resume", "needs_reason", "roles",
    "reviewer", "busy", "reason", ...head.names, ...shown.names], draw);
  return ctx.done();
}

export default { render };
