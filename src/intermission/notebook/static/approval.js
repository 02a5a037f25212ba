// ApprovalWidget: a graph approval's request, Reviewer / Comment / Reason, Approve and
// Reject (Reject needs a reason unless the approval's policy says otherwise), then the
// policy's progress, the session's status, answer, graph and timeline.

function render({ model, el }) {
  const ctx = mount(model, el, "approval-widget");
  const request = h("div", { class: "approval-request" });
  const reviewer = field("approval-reviewer", "Reviewer", { placeholder: "your name" });
  const comment = field("approval-comment", "Comment", { multiline: true, placeholder: "optional note" });
  const reason = field("approval-reason", "Reason", { placeholder: "required to reject" });
  const who = whoLine(ctx, reviewer.input);
  const approve = button("approval-approve", "Approve", "approve");
  const reject = button("approval-reject", "Reject", "reject");
  const why = whyOff(ctx);
  // the agent version the session runs on, and why nothing can be decided here if so
  const head = areas(ctx, ["version", "unserved"]);
  const shown = areas(ctx, ["hint", "progress", "lost", "status", "result", "graph", "timeline"]);
  ctx.root.append(
    ...head.nodes, request, reviewer.box, who.node, comment.box, reason.box,
    h("div", { class: "im-buttons" }, approve, reject), why.node, ...shown.nodes,
  );
  for (const [input, name] of [[reviewer.input, "reviewer"], [comment.input, "comment"], [reason.input, "reason"]]) {
    bindText(ctx, input, name);
  }
  const fields = () => ({
    reviewer: reviewer.input.value, comment: comment.input.value, reason: reason.input.value,
  });
  const draw = () => {
    setHTML(request, model.get("request"));
    const open = !!model.get("can_decide") && !ctx.locked();
    // only what this viewer may do now, as the kernel judged it (why_not says why not)
    const whyNot = model.get("why_not") || {};
    approve.disabled = !(open && model.get("can_approve"));
    // a reason to reject, unless the approval's policy takes a rejection without one
    const needs = model.get("needs_reason") !== false;
    reason.input.placeholder = needs ? "required to reject" : "optional";
    const noReason = needs && !reason.input.value.trim();
    reject.disabled = !(open && model.get("can_reject") && !noReason);
    why.draw([["Approve", approve, whyNot.approve],
      ["Reject", reject, whyNot.reject || (noReason ? NEEDS_REASON : "")]]);
    who.draw();
    for (const f of [reviewer, comment, reason]) f.input.disabled = ctx.dead;
    head.draw();
    shown.draw();
  };
  approve.addEventListener("click", () => ctx.send("approve", fields()));
  reject.addEventListener("click", () => ctx.send("reject", fields()));
  reason.input.addEventListener("input", draw);
  askViewer(ctx, reviewer.input);
  ctx.watch(["request", "can_decide", "can_approve", "can_reject", "why_not", "needs_reason", "roles", "reviewer", "busy", "reason", ...head.names, ...shown.names], draw);
  return ctx.done();
}

export default { render };
