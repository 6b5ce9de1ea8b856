#!/usr/bin/env python3
"""Writes a dpscope gallery's index page (scripts/web gallery): one card per lesson, its preview,
its lesson's line, and the link that opens the browser viewer at its moment.
   gallery.py SITE ENTRIES.tsv
ENTRIES.tsv: one line per lesson, tab-separated: id, title, lesson line, preview (relative to
SITE, may be empty), and the viewer's query (deep link parameters, not yet encoded, as key=value
pairs joined by '&', values free of '&')."""
import html
import sys
import urllib.parse


def with_code(text):
    """The README's line as HTML: its `code` spans in <code>."""
    parts = html.escape(text).split("`")
    return "".join(f"<code>{part}</code>" if i % 2 else part for i, part in enumerate(parts))


def card(entry_id, title, lesson, preview, query):
    params = [tuple(pair.split("=", 1)) for pair in query.split("&") if pair]
    params.append(("lesson", f"{title}: {lesson.replace('`', '')}"))
    href = "viewer/index.html?" + urllib.parse.urlencode(params, quote_via=urllib.parse.quote, safe="/")
    image = f'<img src="{html.escape(preview)}" alt="{html.escape(title)}" loading="lazy">' if preview else ""
    return (f'<a class="card" id="{html.escape(entry_id)}" href="{html.escape(href)}">{image}'
            f"<h2>{html.escape(title)}</h2><p>{with_code(lesson)}</p></a>")


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: gallery.py SITE ENTRIES.tsv")
    site, entries = sys.argv[1], sys.argv[2]
    rows = []
    with open(entries, encoding="utf-8") as lines:
        for line in lines:
            fields = line.rstrip("\n").split("\t")
            if len(fields) != 5:
                sys.exit(f"gallery.py: {entries}: a line has {len(fields)} fields, not 5: {line!r}")
            rows.append(fields)
    # The demo first, then the tutorials by number.
    rows.sort(key=lambda fields: (fields[0] != "demo", fields[0]))
    cards = [card(*fields) for fields in rows]
    page = f"""<!doctype html>
<!-- A dpscope gallery (scripts/web gallery, docs/web.md): each lesson's trace, opened in the
     browser viewer at its moment. -->
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>dpscope: the lessons in the browser</title>
<link rel="icon" href="data:,">
<style>
body {{ margin: 0; padding: 24px; background: #1c1c1f; color: #ddd; font: 15px system-ui, sans-serif; }}
main {{ display: grid; grid-template-columns: repeat(auto-fill, minmax(340px, 1fr)); gap: 18px; }}
.card {{ display: block; background: #2a2a2e; border-radius: 6px; padding: 12px; color: inherit; text-decoration: none; }}
.card:hover {{ background: #34343a; }}
.card img {{ width: 100%; border-radius: 3px; }}
.card h2 {{ font-size: 16px; margin: 8px 0 4px; color: #fff; }}
.card p {{ margin: 0; line-height: 1.4; }}
.card code {{ font-size: 13px; color: #f0c674; }}
</style>
</head>
<body>
<h1>dpscope: data-parallel training, step by step</h1>
<p>Each card opens a recorded run in the browser viewer at the moment its lesson is about.
Step with &larr; &rarr;, play with space, C switches the clock, Tab the compared run, G copies the link.</p>
<main>
{chr(10).join(cards)}
</main>
</body>
</html>
"""
    with open(f"{site}/index.html", "w", encoding="utf-8") as out:
        out.write(page)


if __name__ == "__main__":
    main()
