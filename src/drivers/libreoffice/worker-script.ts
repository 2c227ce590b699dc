// The persistent UNO client, run by Debian's /usr/bin/python3 (it has the `uno` module; other pythons on
// PATH may not). One JSON request per stdin line, one JSON answer per stdout line.
export const UNO_WORKER_PY = String.raw`
import json, sys, time
import uno
from com.sun.star.beans import PropertyValue

def prop(name, value):
    p = PropertyValue()
    p.Name = name
    p.Value = value
    return p

def reply(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()

# argv: the soffice program and the profile URL. The worker starts soffice itself, inside the same jail,
# and talks to it over a named pipe (a Unix socket in the jail's private /tmp): no TCP, no network.
import subprocess, threading, os
office = subprocess.Popen(
    [sys.argv[1], "-env:UserInstallation=" + sys.argv[2], "--headless", "--invisible", "--nologo",
     "--norestore", "--nodefault", "--nolockcheck", "--accept=pipe,name=berth-office;urp;StarOffice.ComponentContext"],
    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

def watch():
    # soffice gone: the worker goes too, so that Berth sees the listener die and replaces it.
    office.wait()
    os._exit(3)

threading.Thread(target=watch, daemon=True).start()
local = uno.getComponentContext()
resolver = local.ServiceManager.createInstanceWithContext("com.sun.star.bridge.UnoUrlResolver", local)
deadline = time.time() + 60
while True:
    try:
        remote = resolver.resolve("uno:pipe,name=berth-office;urp;StarOffice.ComponentContext")
        break
    except Exception as error:
        if time.time() > deadline:
            reply({"ready": False, "error": str(error)})
            sys.exit(1)
        time.sleep(0.1)
desktop = remote.ServiceManager.createInstanceWithContext("com.sun.star.frame.Desktop", remote)
reply({"ready": True})

FILTERS = [
    ("com.sun.star.sheet.SpreadsheetDocument", "calc_pdf_Export"),
    ("com.sun.star.presentation.PresentationDocument", "impress_pdf_Export"),
    ("com.sun.star.drawing.DrawingDocument", "draw_pdf_Export"),
    ("com.sun.star.text.WebDocument", "writer_web_pdf_Export"),
    ("com.sun.star.text.TextDocument", "writer_pdf_Export"),
]

for line in sys.stdin:
    job = json.loads(line)
    doc = None
    try:
        # No macros, no updates of linked content (no fetching of URLs a document points at).
        load = (prop("Hidden", True), prop("ReadOnly", True), prop("UpdateDocMode", 0),
                prop("MacroExecutionMode", 0))
        if job.get("filter"):
            load = load + (prop("FilterName", job["filter"]), prop("FilterOptions", job.get("filterOptions", "")))
        doc = desktop.loadComponentFromURL(uno.systemPathToFileUrl(job["input"]), "_blank", 0, load)
        if doc is None:
            reply({"id": job["id"], "ok": False, "unreadable": True, "error": "the document could not be loaded"})
            continue
        name = "writer_pdf_Export"
        for service, candidate in FILTERS:
            if doc.supportsService(service):
                name = candidate
                break
        if job.get("landscape"):
            styles = doc.getStyleFamilies().getByName("PageStyles")
            for style_name in styles.getElementNames():
                style = styles.getByName(style_name)
                if not style.IsLandscape:
                    width, height = style.Width, style.Height
                    style.IsLandscape = True
                    style.Width, style.Height = max(width, height), min(width, height)
        store = (prop("FilterName", name),)
        if job.get("pageRanges"):
            data = uno.Any("[]com.sun.star.beans.PropertyValue", (prop("PageRange", job["pageRanges"]),))
            store = store + (prop("FilterData", data),)
        uno.invoke(doc, "storeToURL", (uno.systemPathToFileUrl(job["output"]), store))
        reply({"id": job["id"], "ok": True})
    except Exception as error:
        reply({"id": job["id"], "ok": False, "error": str(error)[:500]})
    finally:
        if doc is not None:
            try:
                doc.close(True)
            except Exception:
                pass
`;
