"""gunicorn's settings for the web side (README, "Production"):

    gunicorn -c python:config.gunicorn_conf config.wsgi

These are defaults: gunicorn's own command-line flags and GUNICORN_CMD_ARGS override any of them
(`--bind unix:/run/report-console/gunicorn.sock`, `--workers 9`, `--timeout 90`). The control
socket is the exception (gunicorn has no flag to turn it on): a config file that imports this one
and sets `control_socket_disable = False`.
"""

import os

from config.env import env_list, env_str

_BASE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Loopback: the reverse proxy in front is the only way in, and the only peer whose X-Forwarded-For
# is believed (CONSOLE_TRUSTED_PROXIES). Bind another address only with the proxy's in that list.
bind = ["127.0.0.1:8000"]
# Sync workers: each request holds one process; 2 per core plus one is gunicorn's own advice.
workers = 2 * (os.cpu_count() or 1) + 1
# Above the Redis client's retry budget (10-21 s with the defaults) plus a slow query: a request
# that rides out a Sentinel failover must not be killed as a hung worker.
timeout = 60
graceful_timeout = 30
keepalive = 5
# A worker is replaced after this many requests (with jitter), so a slow leak cannot grow forever.
max_requests = 2000
max_requests_jitter = 200
# Only these proxy addresses may set X-Forwarded-Proto (HTTPS detection behind a load balancer):
# the same peers Django believes about the client's address.
forwarded_allow_ips = ",".join(env_list("CONSOLE_TRUSTED_PROXIES", "127.0.0.1,::1"))
# gunicorn 25+ opens a control socket (gunicornc: add or kill workers, reload) under $HOME or
# $XDG_RUNTIME_DIR by default. Off; when turned on (see above), under var/, mode 0600.
control_socket_disable = True
control_socket = os.path.join(env_str("VAR_DIR", _BASE_DIR + "/var"), "gunicorn.ctl")
control_socket_mode = 0o600
# Heartbeat files on tmpfs: a worker on a slow disk must not look hung.
worker_tmp_dir = "/dev/shm" if os.path.isdir("/dev/shm") else None

accesslog = "-"
errorlog = "-"
loglevel = "info"
# The path without its query string (%(U)s, not %(r)s): a query may carry a token or a search for
# something private; no request header is logged (Authorization, Cookie).
access_log_format = '%(h)s "%(m)s %(U)s %(H)s" %(s)s %(B)s %(M)sms "%(a)s"'
proc_name = "report-console-web"
