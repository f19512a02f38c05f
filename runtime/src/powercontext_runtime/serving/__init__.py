"""How ``powercontext serve`` meets the network, below the ASGI application.

* :mod:`.listeners` binds the TCP socket and the unix-domain socket before anything is
  announced, so the ready line is true when printed, a busy port or a live daemon on the
  socket is a clear refusal, and a stale socket file left by a crash is replaced.
* :mod:`.limits` is the HTTP protocol uvicorn runs on every connection, with the bounds an
  unauthenticated client must not be able to exceed: request-head size, head and body
  deadlines, connections per listener, and an eviction rule so slow or idle connections
  cannot crowd out real requests.
"""
