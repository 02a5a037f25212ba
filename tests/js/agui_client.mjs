// The real AG-UI client (@ag-ui/client's HttpAgent) driving an intermission server.
// argv[2]: JSON {url, threadId, headers?, steps: [{runId, user?, resume?}]}; prints one
// JSON line: per step the event types seen, the outcome, the pending interrupts, the
// error (client-side or RUN_ERROR), the RUN_ERROR the client reported (runError), and at
// the end the agent's messages.
import { HttpAgent } from "@ag-ui/client";

const plan = JSON.parse(process.argv[2]);
const agent = new HttpAgent({ url: plan.url, headers: plan.headers || {}, threadId: plan.threadId });
const steps = [];
for (const step of plan.steps) {
  if (step.user) agent.addMessage({ id: step.runId + "-user", role: "user", content: step.user });
  const seen = { runId: step.runId, types: [], events: [], outcome: null, error: null, runError: null };
  let resume = step.resume;
  if (step.resumeAll) {
    resume = agent.pendingInterrupts.map((i) => ({ interruptId: i.id, status: "resolved", payload: step.resumeAll, metadata: step.metadata }));
  }
  try {
    await agent.runAgent(
      { runId: step.runId, ...(resume ? { resume } : {}) },
      {
        onEvent: ({ event }) => { seen.types.push(event.type); seen.events.push(event); },
        onRunFinishedEvent: ({ outcome }) => { seen.outcome = outcome; },
        onRunErrorEvent: ({ event }) => { seen.runError = { code: event.code, message: event.message }; },
      },
    );
  } catch (e) {
    seen.error = String(e && e.message ? e.message : e);
  }
  seen.pending = agent.pendingInterrupts.map((i) => i.id);
  steps.push(seen);
}
console.log(JSON.stringify({ steps, messages: agent.messages }));
