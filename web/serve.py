#!/usr/bin/env python3
"""Serves a built dpscope-view page (scripts/web serve): one folder on 127.0.0.1, with the MIME
types a browser needs for WebAssembly, and without caching, so a rebuilt page is what loads.
   serve.py FOLDER PORT"""
import functools
import http.server
import sys


class Handler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {
        **http.server.SimpleHTTPRequestHandler.extensions_map,
        ".wasm": "application/wasm",
        ".js": "text/javascript",
        ".json": "application/json",
        ".gz": "application/gzip",
        ".sqlite": "application/vnd.sqlite3",
    }

    def end_headers(self):
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, format, *args):
        pass


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: serve.py FOLDER PORT")
    folder, port = sys.argv[1], int(sys.argv[2])
    handler = functools.partial(Handler, directory=folder)
    with http.server.ThreadingHTTPServer(("127.0.0.1", port), handler) as server:
        print(f"web: serving {folder} on http://127.0.0.1:{port}/ (Ctrl-C stops)", flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
