// The Pyodide kernel imports this module in place of pyodide.mjs (the site's jupyter-lite.json
// points its pyodideUrl here; build.py sets that). It hands over to the real loadPyodide and,
// meanwhile, tells the page what Pyodide downloads, as it downloads: every fetch of a file of
// this folder is counted as its bytes arrive and reported on a BroadcastChannel, which the
// page's loading.js shows ("downloading the Python interpreter: 12.3 of 31.8 MB").
// Nothing else changes: the same bytes, status and headers reach Pyodide.
import * as pyodide from "./pyodide.mjs";

export * from "./pyodide.mjs";

const channel = new BroadcastChannel("intermission-lite-loading");
const here = new URL(".", import.meta.url).href;
const realFetch = globalThis.fetch;

function report(message) {
  try {
    channel.postMessage(message);
  } catch (error) {
    // a page that is gone: nothing to tell
  }
}

globalThis.fetch = async function (input, init) {
  const response = await realFetch.call(this, input, init);
  const url = typeof input === "string" ? new URL(input, here).href : input.href || input.url || "";
  if (!url.startsWith(here) || !response.ok || !response.body) return response;
  const file = decodeURIComponent(url.slice(here.length).split(/[?#]/)[0]);
  const total = Number(response.headers.get("content-length")) || 0;
  let loaded = 0;
  let last = 0;
  const counted = response.body.pipeThrough(
    new TransformStream({
      transform(chunk, controller) {
        loaded += chunk.byteLength;
        controller.enqueue(chunk);
        const now = Date.now();
        if (now - last > 100) {
          last = now;
          report({ kind: "progress", file, loaded, total });
        }
      },
      flush() {
        report({ kind: "progress", file, loaded, total, done: true });
      },
    }),
  );
  return new Response(counted, {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
};

export async function loadPyodide(options) {
  report({ kind: "start" });
  try {
    const loaded = await pyodide.loadPyodide(options);
    report({ kind: "runtime-ready" });
    return loaded;
  } catch (error) {
    report({ kind: "failed", message: String(error && error.message ? error.message : error) });
    throw error;
  }
}
