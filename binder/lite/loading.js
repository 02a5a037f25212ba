// What the page is doing while Python loads, said on the page (build.py adds this script to
// every app of the JupyterLite site). Three steps, each with what, how much and how far:
//   1. JupyterLab itself loads (the page);
//   2. Pyodide — Python compiled to WebAssembly — and the kernel's packages download: the
//      kernel's worker reports every byte as it arrives (loader.mjs), measured against the
//      total the build wrote into static/pyodide/loading.json;
//   3. the kernel starts; once it is idle the box says how long it took, then fades.
// Until then JupyterLab's own status bar reads "No Kernel" or "Unknown": the box says why.
(function () {
  "use strict";
  const CHANNEL = "intermission-lite-loading";
  const script = document.currentScript;
  const pyodideDir = new URL("pyodide/", script ? script.src : location.href);
  const MB = (n) => (n / 1e6).toFixed(1);
  const state = {
    step: "page",
    files: {},
    manifest: null,
    started: false,
    readyAt: null,
    since: 0,
    failed: null,
    current: null,
    hideTimer: null,
  };

  fetch(new URL("loading.json", pyodideDir))
    .then((r) => (r.ok ? r.json() : null))
    .then((m) => {
      state.manifest = m;
      render();
    })
    .catch(() => {});

  const box = document.createElement("div");
  box.id = "im-lite-loading";
  box.setAttribute("role", "status");
  box.setAttribute("aria-live", "polite");
  box.innerHTML =
    '<div class="im-ll-title"></div><div class="im-ll-detail"></div>' +
    '<progress class="im-ll-bar" max="1" value="0"></progress>' +
    '<div class="im-ll-figures"></div><div class="im-ll-note"></div>';
  const style = document.createElement("style");
  style.textContent = `
#im-lite-loading{position:fixed;right:16px;bottom:36px;z-index:10001;width:400px;
 max-width:calc(100vw - 32px);box-sizing:border-box;padding:12px 14px;border-radius:8px;
 background:#263238;color:#fff;font:13px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;
 box-shadow:0 4px 16px rgba(0,0,0,.35);transition:opacity .6s ease}
#im-lite-loading.im-ll-hidden{opacity:0;pointer-events:none}
#im-lite-loading .im-ll-title{font-weight:600;font-size:14px;margin-bottom:2px}
#im-lite-loading .im-ll-detail,#im-lite-loading .im-ll-note{color:#eceff1}
#im-lite-loading .im-ll-note{font-size:12px;margin-top:4px;color:#cfd8dc}
#im-lite-loading .im-ll-figures{font-variant-numeric:tabular-nums;margin-top:2px}
#im-lite-loading progress{width:100%;height:8px;margin-top:6px;accent-color:#4fc3f7}
#im-lite-loading progress:not([value]){opacity:.6}`;

  function mount() {
    if (!document.body) return;
    document.head.appendChild(style);
    document.body.appendChild(box);
    render();
  }
  if (document.body) mount();
  else document.addEventListener("DOMContentLoaded", mount);

  function describe(file) {
    const known = (state.manifest && state.manifest.describe) || {};
    if (known[file]) return known[file];
    const wheel = file.match(/^([A-Za-z0-9_.]+?)-\d/);
    return wheel ? `the package ${wheel[1].replace(/_/g, "-")}` : file;
  }

  function totals() {
    const got = Object.values(state.files).reduce((n, f) => n + f.loaded, 0);
    const expected = (state.manifest && state.manifest.total) || 0;
    return { got, total: Math.max(expected, got) };
  }

  function set(sel, text) {
    box.querySelector(sel).textContent = text;
  }

  function render() {
    const seconds = ((performance.now() - state.since) / 1000).toFixed(1);
    const bar = box.querySelector(".im-ll-bar");
    const { got, total } = totals();
    box.dataset.step = state.step;
    box.dataset.downloaded = String(got);
    box.dataset.total = String(total);
    if (state.step === "page") {
      set(".im-ll-title", "Step 1 of 3 · Loading JupyterLab");
      set(".im-ll-detail", "The notebook interface itself, from this site.");
      bar.removeAttribute("value");
      const page = performance.getEntriesByType("resource")
        .reduce((n, e) => n + (e.encodedBodySize || 0), 0);
      set(".im-ll-figures", `${MB(page)} MB so far · ${seconds} s`);
      set(".im-ll-note", "Next, Python downloads into this page: nothing is installed on your computer.");
    } else if (state.step === "download") {
      set(".im-ll-title", "Step 2 of 3 · Downloading Python for this page");
      const loading = Object.entries(state.files).filter(([, f]) => !f.done).map(([n]) => n);
      let what;
      if (!state.started) what = "waiting for the notebook's kernel to start";
      else if (loading.length) what = describe(loading.includes(state.current) ? state.current : loading[0]);
      else if (got) what = "setting up what arrived (compiling the interpreter, unpacking packages)";
      else what = "Pyodide, Python compiled to WebAssembly";
      set(".im-ll-detail", `Now: ${what}.`);
      if (total) bar.value = got / total;
      const share = total ? ` · ${Math.floor((100 * got) / total)} %` : "";
      set(".im-ll-figures", `${MB(got)} of ${MB(total)} MB${share} · ${seconds} s`);
      set(".im-ll-note", 'Until Python is ready the status bar says "No Kernel" or "Unknown"; ' +
        "a later visit loads from your browser's cache.");
    } else if (state.step === "kernel") {
      set(".im-ll-title", "Step 3 of 3 · Starting the Python kernel");
      set(".im-ll-detail", "Importing IPython, ipykernel and the widgets from what was downloaded.");
      bar.value = 1;
      set(".im-ll-figures", `${MB(got)} MB downloaded · ${seconds} s`);
      set(".im-ll-note", "Cells you run now wait for it; nothing is lost.");
    } else if (state.step === "ready") {
      const took = ((state.readyAt - state.since) / 1000).toFixed(1);
      box.dataset.readyS = took;
      set(".im-ll-title", "Python is ready");
      const from = state.since ? "it started" : "the page opened";
      set(".im-ll-detail", `The kernel was ready ${took} s after ${from}.`);
      bar.value = 1;
      set(".im-ll-figures", `${MB(got)} MB downloaded`);
      set(".im-ll-note", "Run the cells from the top (Run ▸ Run All Cells).");
    } else if (state.step === "packages") {
      set(".im-ll-title", "Loading packages for your cell");
      set(".im-ll-detail", `Now: ${state.current ? describe(state.current) : "…"}.`);
      const file = state.files[state.current] || { loaded: 0, total: 0 };
      if (file.total) bar.value = file.loaded / file.total;
      set(".im-ll-figures", `${MB(file.loaded)} of ${MB(file.total)} MB`);
      set(".im-ll-note", "Pyodide fetches a package the first time a cell imports it.");
    } else if (state.step === "failed") {
      set(".im-ll-title", "Python could not start");
      set(".im-ll-detail", state.failed || "The kernel failed while loading.");
      set(".im-ll-figures", `${MB(got)} of ${MB(total)} MB · ${seconds} s`);
      set(".im-ll-note", "Reload the page to try again; the browser's console has the details.");
    }
  }

  function hideSoon(ms) {
    clearTimeout(state.hideTimer);
    state.hideTimer = setTimeout(() => box.classList.add("im-ll-hidden"), ms);
  }

  const channel = "BroadcastChannel" in window ? new BroadcastChannel(CHANNEL) : null;
  if (channel) {
    channel.onmessage = (event) => {
      const m = event.data || {};
      if (m.kind === "start") {
        // a kernel (again, after a restart or in another notebook) loads Python
        if (state.readyAt !== null) state.since = performance.now();
        state.started = true;
        state.files = {};
        state.readyAt = null;
        state.step = "download";
        box.classList.remove("im-ll-hidden");
      } else if (m.kind === "progress") {
        state.files[m.file] = { loaded: m.loaded, total: m.total, done: !!m.done };
        if (!m.done) state.current = m.file;
        if (state.step === "page") state.step = "download";
        if (state.step === "ready" || state.step === "packages") {
          // after start-up: a cell importing a package Pyodide fetches now
          state.step = "packages";
          box.classList.remove("im-ll-hidden");
          clearTimeout(state.hideTimer);
          if (m.done) hideSoon(1500);
        }
      } else if (m.kind === "runtime-ready") {
        if (state.step === "download") state.step = "kernel";
      } else if (m.kind === "failed") {
        state.step = "failed";
        state.failed = m.message;
      }
      render();
    };
  }

  function kernelIdle() {
    const app = window.jupyterapp;
    const widget = app && app.shell && app.shell.currentWidget;
    const context = widget && widget.sessionContext;
    const kernel = context && context.session && context.session.kernel;
    return !!kernel && kernel.status === "idle";
  }

  function notebookOpen() {
    const app = window.jupyterapp;
    const widget = app && app.shell && app.shell.currentWidget;
    return !!(widget && widget.sessionContext);
  }

  function tick() {
    const app = window.jupyterapp;
    if (state.step === "page" && app && app.started) {
      app.started.then(() => {
        if (state.step !== "page") return;
        state.step = "download"; // the kernel's worker starts as the notebook opens
        render();
        setTimeout(() => {
          // no notebook open (the file browser): no kernel to wait for, until one opens
          if (!state.started && !notebookOpen()) box.classList.add("im-ll-hidden");
        }, 3000);
      });
    }
    if (["page", "download", "kernel"].includes(state.step) && kernelIdle()) {
      state.step = "ready";
      state.readyAt = performance.now();
      box.classList.remove("im-ll-hidden");
      hideSoon(5000);
    }
    render();
    if (state.step !== "failed") setTimeout(tick, state.step === "ready" || state.step === "packages" ? 1000 : 200);
  }
  setTimeout(tick, 200);
})();
