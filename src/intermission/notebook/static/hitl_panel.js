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
  const why = whyOff(ctx);
  // the agent version the session runs on, and why nothing can be decided here if so
  const head = areas(ctx, ["version", "unserved"]);
  const shown = areas(ctx, ["hint", "progress", "lost", "status", "result", "timeline"]);
  ctx.root.append(
    ...head.nodes, rowsBox, empty, reviewer.box, who.node, comment.box, reason.box,
    h("div", { class: "im-buttons" }, approveAll, rejectAll, resume), why.node, ...shown.nodes,
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
    row.why = whyOff(ctx);
    row.box = h("div", { class: "hitl-row" }, row.head, row.args,
      h("div", { class: "im-buttons" }, ...Object.values(row.buttons), row.state), row.why.node);
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
      // only what this viewer may do now, as the kernel judged it (why_not says why not)
      const whyNot = call.why_not || {};
      row.buttons.approve.disabled = !(open && call.can_approve);
      row.buttons.skip.disabled = !(open && call.can_skip);
      // a reason to reject, unless the call's policy takes a rejection without one
      const noReason = !hasReason && call.needs_reason !== false;
      row.buttons.reject.disabled = !(open && call.can_reject && !noReason);
      row.why.draw([["Approve", row.buttons.approve, whyNot.approve],
        ["Reject", row.buttons.reject, whyNot.reject || (noReason ? NEEDS_REASON : "")],
        ["Skip", row.buttons.skip, whyNot.skip]]);
    }
    setHTML(empty, model.get("empty"));
    const batch = !!model.get("can_all") && !locked;
    const allWhy = model.get("why_not") || {};
    approveAll.disabled = !(batch && model.get("can_approve"));
    const needs = model.get("needs_reason") !== false;
    reason.input.placeholder = needs ? "required to reject" : "optional";
    const noReason = !hasReason && needs;
    rejectAll.disabled = !(batch && model.get("can_reject") && !noReason);
    why.draw([["Approve all", approveAll, allWhy.approve],
      ["Reject all", rejectAll, allWhy.reject || (noReason ? NEEDS_REASON : "")]]);
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
  askViewer(ctx, reviewer.input);
  ctx.watch(["calls", "empty", "can_all", "can_approve", "can_reject", "why_not", "can_resume", "show_resume", "needs_reason", "roles",
    "reviewer", "busy", "reason", ...head.names, ...shown.names], draw);
  return ctx.done();
}

export default { render };
