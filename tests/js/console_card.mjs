// Renders one reviewer-console card with the console's own script, in Node, on a minimal
// DOM (enough for render()): argv[2] is the page's script, argv[3] a listed interrupt (JSON).
// Prints the card as JSON: attributes, texts, and each button's disabled state and title.
import fs from "node:fs";
import vm from "node:vm";

class Node_ {
  constructor(tag) { this.tag = tag; this.attrs = {}; this.kids = []; this.disabled = false;
                     this.title = ""; this.textContent = ""; this.className = "";
                     this.classList = {add: () => {}, contains: () => false}; }
  setAttribute(k, v) { this.attrs[k] = String(v); }
  getAttribute(k) { return this.attrs[k]; }
  append(...kids) { this.kids.push(...kids); }
  replaceChildren(...kids) { this.kids = kids; }
  addEventListener() {}
  remove() {}
  scrollIntoView() {}
  get text() { return this.kids.map((k) => (k instanceof Node_ ? k.text : k.data)).join(""); }
}
const elements = new Map();
const document = {
  createElement: (tag) => new Node_(tag),
  createTextNode: (data) => ({data}),
  getElementById: (id) => { if (!elements.has(id)) elements.set(id, new Node_("div")); return elements.get(id); },
};
const context = vm.createContext({
  document, window: {addEventListener() {}}, location: {hash: ""},
  sessionStorage: {getItem: () => null, setItem() {}}, URLSearchParams, crypto: globalThis.crypto,
  fetch: () => { throw new Error("no network here"); }, setInterval() {}, console,
});
vm.runInContext(fs.readFileSync(process.argv[2], "utf8"), context);
context.item = JSON.parse(process.argv[3]);
const card = vm.runInContext("render(item)", context);
function find(n, id) {
  if (!(n instanceof Node_)) return null;
  if (n.attrs["data-testid"] === id) return n;
  for (const k of n.kids) { const f = find(k, id); if (f) return f; }
  return null;
}
const button = (id) => { const b = find(card, id); return {disabled: b.disabled, title: b.title}; };
const note = find(card, "version-note");
console.log(JSON.stringify({
  attrs: card.attrs, text: card.text, note: note ? note.text : null,
  approve: button("approve"), reject: button("reject"),
}));
