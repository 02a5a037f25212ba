// ResumeWidget: Resume continues a session with nothing to decide; when it pauses for a
// decision, the widget that decides it is shown here instead (the `next` trait).

function render({ model, el, host }) {
  const ctx = mount(model, el, "resume-widget");
  const resume = button("history-resume", "Resume", "primary");
  const own = h("div", { class: "im-own" });
  const note = h("div", { class: "resume-note" });
  const slot = h("div", { class: "resume-next" });
  const head = areas(ctx, ["version", "unserved"]);
  const shown = areas(ctx, ["hint", "progress", "lost", "status", "result", "graph", "timeline"]);
  own.append(...head.nodes, h("div", { class: "im-buttons" }, resume), ...shown.nodes);
  ctx.root.append(own, note, slot);
  resume.addEventListener("click", () => ctx.send("resume", {}));
  const draw = () => {
    const turned = !!model.get("next");
    own.hidden = turned;
    setHTML(note, turned ? model.get("note") : "");
    resume.disabled = !model.get("can_resume") || ctx.locked();
    head.draw();
    shown.draw();
  };
  ctx.watch(["next", "note", "can_resume", "busy", ...head.names, ...shown.names], draw);
  child(ctx, host, slot, "next");
  return ctx.done();
}

export default { render };
