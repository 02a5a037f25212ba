// Parse each mermaid document given on stdin (a JSON array of strings) with the real
// mermaid parser in a jsdom window; print a JSON array of null (parsed) or the error text.
import { JSDOM } from "jsdom";

const dom = new JSDOM("<!doctype html><html><body></body></html>", { pretendToBeVisual: true });
globalThis.window = dom.window;
globalThis.document = dom.window.document;
for (const key of ["Element", "HTMLElement", "SVGElement", "DOMParser", "Node", "navigator"]) {
  if (!(key in globalThis)) globalThis[key] = dom.window[key];
}
const { default: mermaid } = await import("mermaid");
mermaid.initialize({ startOnLoad: false, securityLevel: "strict" });

let input = "";
for await (const chunk of process.stdin) input += chunk;
const results = [];
for (const text of JSON.parse(input)) {
  try {
    await mermaid.parse(text);
    results.push(null);
  } catch (err) {
    results.push(String(err && err.message ? err.message : err));
  }
}
process.stdout.write(JSON.stringify(results));
