"""The patch as read on the host, before anything runs: screening of the raw bytes, the
added lines with their target line numbers, the diff cost's measure, the pure-Python hunk
application, and the one serialised ``ast.parse`` for untrusted source. Pure; no sandbox."""
