// Stepper: Step / Run / Reset over a graph, with the graph redrawn and where it stopped.

function render({ model, el }) {
  const ctx = mount(model, el, "im-stepper");
  const steps = field("stepper-n", "Steps", { type: "number" });
  steps.input.min = "1";
  steps.input.max = "1000";
  steps.input.classList.add("im-number");
  const step = button("stepper-step", "Step", "primary");
  const run = button("stepper-run", "Run", "plain");
  const reset = button("stepper-reset", "Reset", "plain");
  const status = h("div", { class: "stepper-status" });
  const graph = h("div", { class: "stepper-graph" });
  ctx.root.append(h("div", { class: "im-row" }, steps.box, step, run, reset), status, graph);
  const set = () => { steps.input.value = String(model.get("steps") || 1); };
  set();
  model.on("change:steps", set);
  ctx.cleanups.push(() => model.off("change:steps", set));
  const draw = () => {
    for (const b of [step, run, reset]) b.disabled = ctx.locked();
    steps.input.disabled = ctx.dead;
    setHTML(status, model.get("status"));
    setHTML(graph, model.get("graph"));
  };
  step.addEventListener("click", () => ctx.send("step", { n: Number(steps.input.value) || 1 }));
  run.addEventListener("click", () => ctx.send("run", {}));
  reset.addEventListener("click", () => ctx.send("reset", {}));
  ctx.watch(["status", "graph", "busy"], draw);
  return ctx.done();
}

export default { render };
