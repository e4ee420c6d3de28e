from http.server import BaseHTTPRequestHandler, HTTPServer


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        healthy = False
        self.send_response(200 if healthy else 500)
        self.end_headers()
        self.wfile.write(b"ok" if healthy else b"broken")

    def log_message(self, *args):
        pass


HTTPServer(("127.0.0.1", 8765), Handler).serve_forever()
