"""Build the tutorials into a JupyterLite site: the browser runs them, no server (`make lite`).

Everything comes from the registries, nothing from a CDN at run time:

- Pyodide's runtime from npm (``package.json``/``package-lock.json`` here), and Graphviz
  compiled to WebAssembly (``@viz-js/viz``), which draws the graphs where no ``dot`` runs;
- every wheel from PyPI for Pyodide's platform (``wheels.txt``): pure wheels and
  ``pyemscripten`` wheels; PyYAML has none, so a pure wheel is made from its sdist; jedi's
  loses typeshed's third-party stubs (``slim_jedi``);
- the widgets' front ends: JupyterLab's widget manager and anywidget's prebuilt extension
  (installed in the build's environment, ``requirements-build.txt``);
- the package's own wheel, and the kernel's wheels from its labextension;
- a ``pyodide-lock.json`` written here (Pyodide's own lock points at wheels it rebuilt, whose
  hashes differ from PyPI's), so ``import intermission`` works with no install cell;
- the tutorials, with what a browser needs said in them (05, 11 and 13 keep their database
  in memory); 09, 10 and 12 cannot run there: they are Markdown files (``NN_name.md``) that
  say so first, so opening one starts no kernel and downloads nothing;
- a loading message: while Pyodide loads, every page says what it downloads, how much and
  how far (``loader.mjs`` reports each download from the kernel's worker, ``loading.js``
  shows it).

Usage: ``python binder/lite/build.py OUT`` leaves the site in ``OUT/site``.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PLATFORM = "pyemscripten_2026_0_wasm32"
PY = "3.14"
# What the lock's markers are evaluated against (Pyodide 314's interpreter).
ENV = {
    "sys_platform": "emscripten", "platform_system": "Emscripten", "os_name": "posix",
    "platform_machine": "wasm32", "implementation_name": "cpython",
    "platform_python_implementation": "CPython", "python_version": PY,
    "python_full_version": "3.14.2", "implementation_version": "3.14.2", "extra": "",
}  # fmt: skip
RUNTIME = ["pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide.js"]
KERNEL_EXT = "share/jupyter/labextensions/@jupyterlite/pyodide-kernel-extension/static/pypi"
KERNEL_WHEELS = ("piplite-", "pyodide_kernel-", "ipykernel-", "widgetsnbextension-4.0.999")
# Unused in a browser: the kernel's shim stands in for widgetsnbextension, and no terminal.
DROP = {"widgetsnbextension", "pexpect", "ptyprocess"}
NOTEBOOK_EXTRA = ["ipywidgets", "ipython", "graphviz", "anywidget"]


def run(*cmd: str | Path, cwd: Path | None = None) -> None:
    """Run a command, echoed, failing the build when it fails."""
    print("+", " ".join(map(str, cmd)), flush=True)
    subprocess.run([str(c) for c in cmd], check=True, cwd=cwd)


def pip(*args: str | Path) -> None:
    """Run this venv's pip."""
    run(sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args)


# -- wheels ----------------------------------------------------------------------------
def download_wheels(dest: Path) -> None:
    """Every wheel in wheels.txt (and what it needs) for Pyodide's platform, from PyPI."""
    pip("download", "--platform", PLATFORM, "--python-version", PY, "--only-binary=:all:",
        "-d", dest, "-r", HERE / "wheels.txt")  # fmt: skip


def pure_pyyaml(dest: Path, work: Path) -> None:
    """PyPI has no Pyodide wheel of PyYAML: wrap its sdist's pure-Python ``lib/yaml`` (no
    libyaml C extension; ``yaml.__with_libyaml__`` is False) as a py3-none-any wheel."""
    sdists = work / "sdist"
    # the sdist only: --no-binary=:all: would build its build tools (Cython) from source too
    pip("download", "--no-binary=pyyaml", "--no-deps", "-d", sdists,
        "PyYAML>=6")  # fmt: skip
    sdist = next(sdists.glob("*.tar.gz"))
    version = re.sub(r"^(?i:pyyaml)-|\.tar\.gz$", "", sdist.name)
    files: dict[str, bytes] = {}
    with tarfile.open(sdist) as tar:
        for member in tar.getmembers():
            parts = member.name.split("/")
            if member.isfile() and parts[1:3] == ["lib", "yaml"]:
                extracted = tar.extractfile(member)
                assert extracted is not None
                files["yaml/" + "/".join(parts[3:])] = extracted.read()
    assert "yaml/__init__.py" in files, f"no lib/yaml in {sdist.name}"
    info = f"pyyaml-{version}.dist-info"
    files[f"{info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: PyYAML\nVersion: {version}\n"
        "Summary: YAML parser and emitter for Python (pure Python, built for Pyodide)\n"
        "License: MIT\n"
    ).encode()
    files[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: intermission-lite\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n"
    )
    files[f"{info}/top_level.txt"] = b"yaml\n"
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    for name, data in sorted(files.items()):
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        writer.writerow([name, f"sha256={digest}", len(data)])
    writer.writerow([f"{info}/RECORD", "", ""])
    files[f"{info}/RECORD"] = record.getvalue().encode()
    with zipfile.ZipFile(dest / f"pyyaml-{version}-py3-none-any.whl", "w") as whl:
        for name, data in files.items():
            whl.writestr(zipfile.ZipInfo(name, (2020, 1, 1, 0, 0, 0)), data)


# jedi carries typeshed's stubs of some 300 third-party packages (4,314 files, 9.6 MB
# unpacked, three quarters of its wheel); none of them is installed in the page, and every
# kernel start unpacks the whole wheel into memory. Completion keeps the standard library's
# stubs and reads the installed packages' own sources.
JEDI_DROPPED = "jedi/third_party/typeshed/stubs/"


def slim_jedi(dest: Path) -> None:
    """Rewrite jedi's wheel without typeshed's third-party stubs (its RECORD too)."""
    (wheel,) = dest.glob("jedi-*.whl")
    with zipfile.ZipFile(wheel) as whl:
        kept = [(i, whl.read(i)) for i in whl.infolist() if not i.filename.startswith(JEDI_DROPPED)]
    slim: list[tuple[zipfile.ZipInfo, bytes]] = []
    for info, data in kept:
        if info.filename.endswith(".dist-info/RECORD"):
            lines = data.decode().splitlines(keepends=True)
            data = "".join(x for x in lines if not x.startswith(JEDI_DROPPED)).encode()
        slim.append((info, data))
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as whl:
        for info, data in slim:
            whl.writestr(info, data)


def kernel_wheels(dest: Path) -> None:
    """The kernel's own wheels (piplite, pyodide-kernel, the ipykernel and widgets shims)
    ship inside its labextension."""
    shipped = (Path(sys.prefix) / KERNEL_EXT).glob("*.whl")
    found = [w for w in shipped if w.name.startswith(KERNEL_WHEELS)]
    assert len(found) == len(KERNEL_WHEELS), f"kernel wheels not found in {KERNEL_EXT}: {found}"
    for wheel in found:
        shutil.copy(wheel, dest)


# -- the lock --------------------------------------------------------------------------
def _metadata(whl: zipfile.ZipFile) -> tuple[str, list[str]]:
    meta = next(n for n in whl.namelist() if n.endswith(".dist-info/METADATA"))
    top = [n.split("/")[0] for n in whl.namelist()]
    top_level = next((n for n in whl.namelist() if n.endswith(".dist-info/top_level.txt")), None)
    if top_level is not None:
        imports = whl.read(top_level).decode().split()
    else:  # packages and modules at the wheel's root
        imports = sorted({
            t[:-3] if t.endswith(".py") else t for t in top
            if not t.endswith((".dist-info", ".data", ".pth")) and t != "__pycache__"
            and (t.endswith(".py") or any(n.startswith(f"{t}/") for n in whl.namelist()))
        })  # fmt: skip
    return whl.read(meta).decode(), [i for i in imports if not i.startswith("_") or i == "_yaml"]


def write_lock(npm_lock: Path, folder: Path, extras: dict[str, list[str]]) -> dict[str, object]:
    """One entry per wheel in ``folder``: real sha256, ``depends`` from Requires-Dist with
    markers evaluated for Pyodide (plus ``extras`` given by name), ``imports`` from the
    wheel's top-level names; ``info`` is the npm runtime's."""
    packages: dict[str, dict[str, object]] = {}
    requires: dict[str, list[Requirement]] = {}
    for wheel in sorted(folder.glob("*.whl")):
        with zipfile.ZipFile(wheel) as whl:
            text, imports = _metadata(whl)
        meta = Parser().parsestr(text)
        name = str(canonicalize_name(meta["Name"]))
        reqs = [Requirement(r) for r in meta.get_all("Requires-Dist") or []]
        requires[name] = [r for r in reqs if r.marker is None or r.marker.evaluate(ENV)]
        packages[name] = {
            "name": name, "version": meta["Version"], "file_name": wheel.name,
            "install_dir": "site", "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(),
            "package_type": "package", "imports": imports, "depends": [],
            "unvendored_tests": False, "shared_library": False,
        }  # fmt: skip
    for name, entry in packages.items():
        deps = {str(canonicalize_name(r.name)) for r in requires[name]} | set(extras.get(name, []))
        missing = sorted(deps - packages.keys() - DROP)
        assert not missing, f"{name} needs {missing}: add them to wheels.txt"
        entry["depends"] = sorted(deps & packages.keys())
    info = json.loads(npm_lock.read_text())["info"]
    lock = {"info": info, "packages": dict(sorted(packages.items()))}
    (folder / "pyodide-lock.json").write_text(json.dumps(lock, indent=1) + "\n")
    return lock


# -- the tutorials ---------------------------------------------------------------------
def _md(text: str) -> dict[str, object]:
    return {"cell_type": "markdown", "metadata": {}, "source": text}


BROWSER_DB = (
    "> **In the browser** this page's SQLite database lives in the browser's memory (`/tmp`), "
    "not in your files: JupyterLite's file drive cannot hold a SQLite file. It lasts as long "
    "as this page: a reload starts with an empty store. Run `make lab` for a database on disk."
)
BROWSER_09 = (
    "> **This tutorial cannot run in a browser.** An MCP server over stdio is a subprocess, "
    "and a browser starts no processes; the `mcp` package cannot be installed there either "
    "(it needs `rpds-py`, which has no wheel for Pyodide). The code is shown below as text; "
    "run it for real with `make lab` on your machine."
)
BROWSER_10 = (
    "> **This tutorial cannot run in a browser.** It serves an AG-UI endpoint (uvicorn on a "
    "thread, httpx as its client); a page can open no port and start no thread. The code is "
    "shown below as text; run it for real with `make lab` on your machine."
)
BROWSER_12 = (
    "> **This tutorial cannot run in a browser.** It needs the `otel` extra (the "
    "OpenTelemetry SDK), which this site does not bundle. The code is shown below as text; "
    "run it for real with `make lab` on your machine."
)
NOT_IN_BROWSER = {"09_": BROWSER_09, "10_": BROWSER_10, "12_": BROWSER_12}
"""Tutorials shown as text in the site, each with why."""
IN_MEMORY = {
    "05_": "tutorial-05.sqlite", "11_": "tutorial-11.sqlite", "13_": "tutorial-13.sqlite",
}  # fmt: skip
"""Tutorials whose SQLite file lives in the page's memory (``/tmp``) in the site."""


def as_text(nb: dict[str, Any], why: str) -> str:
    """A tutorial a browser cannot run, as Markdown: its title, why it cannot run here, then
    its prose and its code as code blocks. A Markdown file opens in the site's editor with no
    kernel, so nobody waits for (and downloads) a Python that could not run it."""
    parts = []
    for cell in nb["cells"]:
        source = "".join(cell["source"]).rstrip()
        parts.append(source if cell["cell_type"] == "markdown" else f"```python\n{source}\n```")
    title, _, rest = parts[0].partition("\n")  # the note right under the title
    return "\n\n".join([title, why, rest.strip(), *parts[1:]]) + "\n"


def lite_name(path: Path) -> str:
    """A tutorial's file name in the site: a notebook if a browser can run it, else its
    Markdown text (see :func:`as_text`)."""
    return path.stem + ".md" if path.name[:3] in NOT_IN_BROWSER else path.name


def tutorials(dest: Path) -> None:
    """Copy the tutorials without outputs, for the Pyodide kernel, with 05, 11 and 13 told
    what a browser changes; 09, 10 and 12 as Markdown that says first why they cannot run."""
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = json.loads(path.read_text())
        why = NOT_IN_BROWSER.get(path.name[:3])
        if why is not None:
            (dest / lite_name(path)).write_text(as_text(nb, why))
            continue
        nb["metadata"]["kernelspec"] = {
            "name": "python", "display_name": "Python (Pyodide)", "language": "python",
        }  # fmt: skip
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                cell["outputs"], cell["execution_count"] = [], None
        db = IN_MEMORY.get(path.name[:3])
        if db is not None:
            code = next(c for c in nb["cells"] if c["cell_type"] == "code")
            src = "".join(code["source"])
            old = f'DB = pathlib.Path("{db}")'
            assert old in src, f"{path.name}: the DB path line changed; update build.py"
            code["source"] = src.replace(
                old, f'DB = pathlib.Path("/tmp/{db}")  # memory: gone on reload'
            )
            nb["cells"].insert(1, _md(BROWSER_DB))
        (dest / lite_name(path)).write_text(json.dumps(nb, indent=1) + "\n")


# -- what the page says while Python loads ------------------------------------------------
LOADER = "intermission-loader.mjs"
"""loader.mjs in the site: the kernel imports it in place of pyodide.mjs (see loader.mjs)."""
FETCHED_AT_START = ["pyodide-lock.json", "pyodide.asm.wasm", "python_stdlib.zip"]
"""The runtime files Pyodide fetches when a kernel starts (pyodide.mjs and pyodide.asm.mjs
are imported as modules, not fetched: the page counts them as JupyterLab's own load)."""
DESCRIBE = {
    "pyodide-lock.json": "the list of packages Pyodide can load",
    "pyodide.asm.wasm": "the Python interpreter, compiled to WebAssembly",
    "python_stdlib.zip": "Python's standard library",
}


def loading_manifest(
    pyodide_dir: Path, lock: dict[str, object], preload: list[str]
) -> dict[str, object]:
    """What a kernel's start downloads, by file, and how much in all: the runtime and the
    preloaded packages with everything they depend on (from the lock written here)."""
    packages: dict[str, dict[str, object]] = lock["packages"]  # type: ignore[assignment]
    todo = [str(canonicalize_name(p)) for p in preload]
    wanted: set[str] = set()
    while todo:
        name = todo.pop()
        if name in wanted or name not in packages:
            continue
        wanted.add(name)
        todo.extend(packages[name]["depends"])  # type: ignore[arg-type]
    files = FETCHED_AT_START + sorted(str(packages[n]["file_name"]) for n in wanted)
    sizes = {f: (pyodide_dir / f).stat().st_size for f in files}
    return {"files": sizes, "total": sum(sizes.values()), "describe": DESCRIBE}


def loading_message(site: Path, lock: dict[str, object]) -> None:
    """The site says what it is doing while Pyodide loads: the kernel imports loader.mjs
    (which reports each download), every app page runs loading.js (which shows it), and
    static/pyodide/loading.json holds what a kernel's start downloads."""
    config_path = site / "jupyter-lite.json"
    config = json.loads(config_path.read_text())
    settings = config["jupyter-config-data"]["litePluginSettings"][
        "@jupyterlite/pyodide-kernel-extension:kernel"
    ]
    assert settings["pyodideUrl"] == "./static/pyodide/pyodide.mjs", settings["pyodideUrl"]
    settings["pyodideUrl"] = f"./static/pyodide/{LOADER}"
    config_path.write_text(json.dumps(config, indent=2) + "\n")
    pyodide_dir = site / "static" / "pyodide"
    shutil.copy(HERE / "loader.mjs", pyodide_dir / LOADER)
    preload = settings["loadPyodideOptions"]["packages"]
    manifest = loading_manifest(pyodide_dir, lock, preload)
    (pyodide_dir / "loading.json").write_text(json.dumps(manifest, indent=1) + "\n")
    shutil.copy(HERE / "loading.js", site / "static" / "intermission-loading.js")
    pages = 0
    for index in sorted(site.glob("*/index.html")):
        html = index.read_text()
        root = re.search(r'data-jupyter-lite-root="([^"]*)"', html)
        if root is None:
            continue  # not an app page
        tag = f'<script src="{root.group(1)}/static/intermission-loading.js"></script>'
        index.write_text(html.replace("</head>", f"    {tag}\n  </head>", 1))
        pages += 1
    assert pages >= 3, f"no app pages found in {site}"
    total = int(manifest["total"])  # type: ignore[call-overload]
    print(f"loading message: {pages} pages; a kernel's start downloads {total / 1e6:.1f} MB")


# -- the site --------------------------------------------------------------------------
def main(out: Path) -> None:
    """Build the site into ``out/site`` (``out/work`` and ``out/lite`` are scratch)."""
    out = out.resolve()
    work, lite = out / "work", out / "lite"
    for folder in (work, lite, out / "site"):
        shutil.rmtree(folder, ignore_errors=True)
    wheels = lite / "static" / "pyodide"
    files = lite / "files"
    for folder in (work / "npm", wheels, files):
        folder.mkdir(parents=True)

    for name in ("package.json", "package-lock.json"):
        shutil.copy(HERE / name, work / "npm")
    run("npm", "ci", "--prefix", work / "npm", "--no-audit", "--no-fund", "--loglevel=error")
    npm = work / "npm" / "node_modules" / "pyodide"
    for name in RUNTIME:
        shutil.copy(npm / name, wheels)
    shutil.copy(work / "npm" / "node_modules" / "@viz-js" / "viz" / "dist" / "viz.js", wheels)

    download_wheels(wheels)
    for wheel in wheels.glob("*.whl"):
        if str(canonicalize_name(wheel.name.split("-")[0])) in DROP:
            wheel.unlink()
    pure_pyyaml(wheels, work)
    slim_jedi(wheels)
    kernel_wheels(wheels)
    pip("wheel", "--no-deps", "-w", wheels, ROOT)
    with zipfile.ZipFile(next(wheels.glob("intermission-*.whl"))) as whl:
        assert "intermission/notebook/static/_shared.js" in whl.namelist(), (
            "the package's wheel lacks its widgets' modules (intermission/notebook/static)"
        )
    lock = write_lock(npm / "pyodide-lock.json", wheels, {"intermission": NOTEBOOK_EXTRA})
    print(f"pyodide-lock.json: {len(lock['packages'])} wheels")  # type: ignore[arg-type]

    tutorials(files)
    shutil.copy(HERE / "jupyter-lite.json", lite)
    run(Path(sys.executable).parent / "jupyter", "lite", "build", "--no-sourcemaps",
        "--lite-dir", lite, "--output-dir", out / "site", cwd=lite)  # fmt: skip
    config = json.loads((out / "site" / "jupyter-lite.json").read_text())
    local = "static/pyodide/pyodide.mjs" in json.dumps(config)
    assert local, "the site would load Pyodide from a CDN"
    loading_message(out / "site", lock)
    extensions = {e["name"] for e in config["jupyter-config-data"]["federated_extensions"]}
    assert "anywidget" in extensions, f"the site would draw no widget: {sorted(extensions)}"
    print(f"site: {out / 'site'}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "build" / "lite"))
