"""gunicorn's settings for the web side (README, "Production"):

    gunicorn -c python:config.gunicorn_conf config.wsgi

Every value comes from the environment, blank meaning the default, as for the Django settings.
"""

import os

from config.env import env_bool, env_int, env_list, env_str

_BASE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Loopback: the reverse proxy in front is the only way in, and the only peer whose X-Forwarded-For
# is believed (CONSOLE_TRUSTED_PROXIES). Bind another address only with the proxy's in that list.
bind = env_list("WEB_BIND", "127.0.0.1:8000")
# Sync workers: each request holds one process; 2 per core plus one is gunicorn's own advice.
workers = env_int("WEB_WORKERS", 2 * (os.cpu_count() or 1) + 1, minimum=1)
threads = env_int("WEB_THREADS", 1, minimum=1)
# Above the Redis client's retry budget (10-21 s with the defaults) plus a slow query: a request
# that rides out a Sentinel failover must not be killed as a hung worker.
timeout = env_int("WEB_TIMEOUT", 60, minimum=1)
graceful_timeout = env_int("WEB_GRACEFUL_TIMEOUT", 30, minimum=1)
keepalive = env_int("WEB_KEEPALIVE", 5, minimum=0)
# A worker is replaced after this many requests (with jitter), so a slow leak cannot grow forever.
max_requests = env_int("WEB_MAX_REQUESTS", 2000, minimum=0)
max_requests_jitter = env_int("WEB_MAX_REQUESTS_JITTER", 200, minimum=0)
# Only these proxy addresses may set X-Forwarded-Proto (HTTPS detection behind a load balancer):
# by default the same peers Django believes about the client's address.
forwarded_allow_ips = env_str("WEB_FORWARDED_ALLOW_IPS", ",".join(env_list("CONSOLE_TRUSTED_PROXIES", "127.0.0.1,::1")))
# gunicorn 25+ opens a control socket (gunicornc: add or kill workers, reload) under $HOME or
# $XDG_RUNTIME_DIR by default. Off unless asked for, and then under var/, mode 0600.
control_socket_disable = not env_bool("WEB_CONTROL_SOCKET", False)
control_socket = os.path.join(env_str("VAR_DIR", _BASE_DIR + "/var"), "gunicorn.ctl")
control_socket_mode = 0o600
# Heartbeat files on tmpfs: a worker on a slow disk must not look hung.
worker_tmp_dir = "/dev/shm" if os.path.isdir("/dev/shm") else None

accesslog = env_str("WEB_ACCESS_LOG", "-")
errorlog = "-"
loglevel = env_str("WEB_LOG_LEVEL", "info")
# The path without its query string (%(U)s, not %(r)s): a query may carry a token or a search for
# something private; no request header is logged (Authorization, Cookie).
access_log_format = env_str(
    "WEB_ACCESS_LOG_FORMAT", '%(h)s "%(m)s %(U)s %(H)s" %(s)s %(B)s %(M)sms "%(a)s"'
)
proc_name = "report-console-web"
