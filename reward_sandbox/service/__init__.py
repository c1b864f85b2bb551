"""Service: grading over HTTP, for trainers on other machines or containers.

The server (``server``: ``reward-sandbox serve``), its connection-level guards (``httpguard``), its
bearer token (``auth``), and the client (``client``: ``RemoteGrader``, one or many servers with the
``grade(items)`` shape of a local grader). The client needs the standard library only.
"""
