// ApprovalWidget: a graph approval's request, Reviewer / Comment / Reason, Approve and
// Reject (Reject needs a reason), then the session's status, answer, graph and timeline.

function render({ model, el }) {
  const ctx = mount(model, el, "approval-widget");
  const request = h("div", { class: "approval-request" });
  const reviewer = field("approval-reviewer", "Reviewer", { placeholder: "your name" });
  const comment = field("approval-comment", "Comment", { multiline: true, placeholder: "optional note" });
  const reason = field("approval-reason", "Reason", { placeholder: "required to reject" });
  const approve = button("approval-approve", "Approve", "approve");
  const reject = button("approval-reject", "Reject", "reject");
  const shown = areas(ctx, ["hint", "progress", "lost", "status", "result", "graph", "timeline"]);
  ctx.root.append(
    request, reviewer.box, comment.box, reason.box,
    h("div", { class: "im-buttons" }, approve, reject), ...shown.nodes,
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
    approve.disabled = !open;
    reject.disabled = !(open && reason.input.value.trim());
    for (const f of [reviewer, comment, reason]) f.input.disabled = ctx.dead;
    shown.draw();
  };
  approve.addEventListener("click", () => ctx.send("approve", fields()));
  reject.addEventListener("click", () => ctx.send("reject", fields()));
  reason.input.addEventListener("input", draw);
  ctx.watch(["request", "can_decide", "busy", "reason", ...shown.names], draw);
  return ctx.done();
}

export default { render };
