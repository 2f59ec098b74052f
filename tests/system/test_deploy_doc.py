"""docs/deploy.md, followed on one machine: the page's own files and commands bring up PostgreSQL's
role and database, a Redis master, its replica and three sentinels, SeaweedFS's S3, nginx with TLS,
gunicorn, two workers and the housekeeper; reports submitted over HTTPS through nginx
complete with their files in the bucket, before and after the Redis master is SIGKILLed.

How the page is read (tests/system/deploy_doc.py): a code block is a file when the line above it is
``File `PATH`...:``; the files go under a temporary root through one explicit relocation table
(addresses to 127.0.0.1, ports to free ones, the database name to a scratch one, /etc, /var, /run
and /usr/local under the root, /srv/report-console to this checkout). Processes run as the page's
units say: ExecStart with the same arguments (%i and %H expanded as systemd does), in their
WorkingDirectory, with the environment file as their only settings. Commands run as the page shows
them, less `sudo -u USER` (the test is one user). The test adds only what a machine has already:
nginx's main configuration (Debian's includes the site), a self-signed certificate where certbot
would put one, and the directories Debian's redis packages and their units create.
"""

import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import boto3
import psycopg
import pytest
import redis
import requests
from botocore.config import Config
from requests.adapters import HTTPAdapter

from config.embedded_redis import free_port, redis_server_binary
from config.redis_client import parse_sentinel_url
from tests.conftest import BASE_DIR, wait_until
from tests.debian_packages import installed_program, missing_program_message
from tests.storage_server import weed_binary
from tests.system import deploy_doc
from tests.system.sentinel_cluster import SentinelCluster

# The deploy page brings up its own PostgreSQL database whatever DATABASE_URL says.
pytestmark = [pytest.mark.slow, pytest.mark.database_blind]

PAGE = BASE_DIR / "docs" / "deploy.md"
PUBLIC_NAME = "reports.example.com"
ENV_FILE = "/etc/report-console.env"
MANAGE = "/usr/local/bin/report-manage"
UNITS = "/etc/systemd/system/"
SYSTEMD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# The page's commands the test runs, verbatim (each must appear in the page).
SQL_COMMAND = "sudo -u postgres psql -v ON_ERROR_STOP=1 <<'SQL'"
MIGRATE = "sudo -u reports report-manage migrate"
COLLECTSTATIC = "sudo -u reports report-manage collectstatic --noinput"
CREATE_OPERATOR = "sudo -u reports report-manage createsuperuser --username alice --email alice@example.com"
CREATE_TOKEN = "sudo -u reports report-manage create_api_token reporting-client"
CHECK_DEPLOY = "sudo -u reports report-manage check --deploy"
CHECK_BUCKET = ("sudo -u reports report-manage shell -c \"from django.core.files.storage import storages; "
                "print(storages['default'].listdir(''))\"")
# What the page says check --deploy still reports with its environment file (HSTS for subdomains).
HSTS_NOTES = {"security.W005", "security.W021"}
OPERATOR_PASSWORD = "operator-pass-" + uuid.uuid4().hex[:12]
TASKS_EACH_SIDE = 8
# Idle, every process stops within the page's shortest TimeoutStopSec (an idle worker's warm
# shutdown takes 4 s on a quiet machine, 14 s on a loaded one; before a Sentinel connection cut off
# mid-read was closed, it waited out its blocking pop instead).
STOP_GRACE_SECONDS = 30
PAGE_FILES = {
    ENV_FILE, MANAGE, "/etc/nginx/sites-available/report-console", "/etc/seaweedfs/s3.json",
    "/etc/redis/redis-master.conf", "/etc/redis/redis-replica.conf", "/etc/redis/sentinel-1.conf",
    "/etc/redis/sentinel-2.conf", "/etc/redis/sentinel-3.conf",
    *(UNITS + name for name in ("report-web.service", "report-worker@.service", "report-housekeeper.service",
                                "report-archive.service", "report-archive.timer", "seaweedfs.service")),
}


def nginx_binary() -> str:
    """Debian's nginx, installed (nginx-light) when missing and this process is root with apt-get."""
    found = installed_program("nginx-light", "nginx")
    if not found:
        pytest.fail(missing_program_message("nginx-light", "nginx for the deploy test"), pytrace=False)
    return found


def postgres_admin_url() -> str:
    """The server the tests use: DATABASE_URL's when it is PostgreSQL, else postgres@127.0.0.1:5432."""
    configured = os.environ.get("DATABASE_URL", "")
    if configured.startswith(("postgres://", "postgresql://")):
        return configured.rsplit("/", 1)[0] + "/postgres"
    return "postgresql://postgres@127.0.0.1:5432/postgres"


class PageSentinels(SentinelCluster):
    """SentinelCluster's checks and kill, over a master, a replica and three sentinels started from
    the page's own configuration files."""

    def __init__(self, relocation: deploy_doc.Relocation, password: str):
        self.relocation = relocation
        self.workdir = relocation.path("/var/log/redis")
        self.password = password
        self.master_port, self.replica_port = relocation.port(6379), relocation.port(6380)
        self.sentinel_ports = [relocation.port(port) for port in (26379, 26380, 26381)]
        self.processes = {}

    def start(self) -> "PageSentinels":
        servers = [("master", "/etc/redis/redis-master.conf", []),
                   ("replica", "/etc/redis/redis-replica.conf", [])]
        servers += [(f"sentinel-{n}", f"/etc/redis/sentinel-{n}.conf", ["--sentinel"]) for n in (1, 2, 3)]
        for name, conf, extra in servers:
            self.processes[name] = subprocess.Popen(
                [redis_server_binary(), str(self.relocation.path(conf)), *extra],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=self.relocation.root,
            )
        master = redis.Redis(port=self.master_port, password=self.password, socket_timeout=2)
        wait_until(lambda: self._quietly(lambda: master.info("replication").get("connected_slaves") == 1),
                   timeout=30, message=f"the replica to sync ({self.logs()})")
        for port in self.sentinel_ports:
            sentinel = redis.Redis(port=port, socket_timeout=2)
            wait_until(lambda s=sentinel: self._quietly(lambda: self._sentinel_sees_everyone(s)), timeout=30,
                       message=f"sentinel {port} to see the replica and the other sentinels ({self.logs()})")
        return self


class Promotion(threading.Thread):
    """Watches the sentinels from the kill on: how long until they name another master."""

    def __init__(self, sentinels: PageSentinels, old_master, killed: float):
        super().__init__(daemon=True)
        self.sentinels, self.old_master, self.killed = sentinels, old_master, killed
        self.seconds: float | None = None
        self.start()

    def run(self) -> None:
        deadline = self.killed + 60
        while time.monotonic() < deadline:
            if self.sentinels.master_address() not in (None, self.old_master):
                self.seconds = time.monotonic() - self.killed
                return
            time.sleep(0.1)

    def after(self) -> float | None:
        self.join(60)
        return self.seconds


class PublicNameAdapter(HTTPAdapter):
    """Connects to 127.0.0.1 but speaks TLS to the public name (SNI and certificate check), as a
    browser does when DNS points the name at this machine."""

    def init_poolmanager(self, *args, **kwargs):
        super().init_poolmanager(*args, server_hostname=PUBLIC_NAME, **kwargs)


class Site:
    """The site as a client reaches it: HTTPS through nginx, under its public name."""

    def __init__(self, port: int, certificate: Path):
        self.base, self.host = f"https://127.0.0.1:{port}", f"{PUBLIC_NAME}:{port}"
        self.session = requests.Session()
        self.session.mount("https://", PublicNameAdapter())
        self.session.trust_env = False  # REQUESTS_CA_BUNDLE would replace the site's certificate
        self.session.verify = str(certificate)
        self.session.headers["Host"] = self.host

    def request(self, method: str, path: str, **kwargs) -> requests.Response:
        """Retries a 503 (a Redis failover under way) as its Retry-After asks, within a deadline."""
        deadline = time.monotonic() + 60
        while True:
            response = self.session.request(method, self.base + path, timeout=60, allow_redirects=False,
                                            **kwargs)
            if response.status_code != 503 or time.monotonic() > deadline:
                return response
            assert "Retry-After" in response.headers, response.text[:300]
            time.sleep(min(float(response.headers["Retry-After"]), 1.0))

    def public_path(self, url: str) -> str:
        assert url.startswith(f"https://{self.host}/"), url
        return url[len(f"https://{self.host}"):]


class Processes:
    def __init__(self, logs: Path):
        self.logs = logs
        self.started: dict[str, subprocess.Popen] = {}

    def start(self, name: str, argv: list[str], *, cwd, env) -> subprocess.Popen:
        log = (self.logs / f"{name}.log").open("w")
        self.started[name] = subprocess.Popen(argv, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                              start_new_session=True)
        return self.started[name]

    def log(self, name: str) -> str:
        return (self.logs / f"{name}.log").read_text(errors="replace")[-4000:]

    def exited(self) -> dict[str, str]:
        return {name: self.log(name) for name, process in self.started.items() if process.poll() is not None}

    def stop(self) -> list[str]:
        """SIGTERM to each main process (the units' KillMode=mixed), then SIGKILL to what is left of
        its process group (a work-horse, the scheduler), as systemd does after TimeoutStopSec.
        Returns the processes that were still running STOP_GRACE_SECONDS after their SIGTERM."""
        for process in self.started.values():
            if process.poll() is None:
                process.terminate()
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        lingering = []
        for name, process in self.started.items():
            try:
                process.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                lingering.append(name)
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait(10)
        return lingering


@pytest.fixture
def page():
    markdown = PAGE.read_text()
    return markdown, deploy_doc.page_files(markdown)


@pytest.fixture
def relocation(tmp_path):
    scratch = f"deploy_doc_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    return deploy_doc.Relocation(root=tmp_path / "root", checkout=BASE_DIR,
                                 venv_bin=Path(sys.executable).parent,
                                 weed=weed_binary(), scratch_name=scratch, free_port=free_port)


@pytest.fixture
def scratch_database(relocation, page):
    """The page's role and database (renamed by the relocation), created as it says, dropped after."""
    markdown, _ = page
    assert SQL_COMMAND in markdown
    sql = markdown.split(SQL_COMMAND + "\n", 1)[1].split("\nSQL\n", 1)[0]
    admin_url = postgres_admin_url()
    try:
        admin = psycopg.connect(admin_url, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        pytest.fail(f"the deploy test needs PostgreSQL on 127.0.0.1:5432 ({admin_url}): {exc}", pytrace=False)
    name = relocation.table[deploy_doc.DATABASE_NAME]
    with admin:
        for statement in relocation(sql).split(";\n"):
            if statement.strip():
                admin.execute(statement)
        yield name
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.execute(f"DROP ROLE IF EXISTS {name}")


def write_page_files(files: dict[str, str], relocation: deploy_doc.Relocation) -> None:
    for page_path, text in files.items():
        path = relocation.path(page_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(relocation(text))
    relocation.path(MANAGE).chmod(0o755)
    # What Debian's redis packages and their units (RuntimeDirectory=) create, and the page's install -d.
    for directory in ("/var/lib/redis", "/var/log/redis", "/var/log/nginx", "/run/redis-master",
                      "/run/redis-replica", "/run/sentinel-1", "/run/sentinel-2", "/run/sentinel-3",
                      "/var/lib/seaweedfs", "/var/lib/report-console"):
        relocation.path(directory).mkdir(parents=True, exist_ok=True)


def self_signed_certificate(relocation: deploy_doc.Relocation) -> Path:
    """Where certbot would put the site's certificate: a self-signed one for the public name."""
    live = relocation.path(f"/etc/letsencrypt/live/{PUBLIC_NAME}")
    live.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-subj", f"/CN={PUBLIC_NAME}", "-addext", f"subjectAltName=DNS:{PUBLIC_NAME}",
         "-keyout", str(live / "privkey.pem"), "-out", str(live / "fullchain.pem")],
        check=True, capture_output=True, timeout=60,
    )
    return live / "fullchain.pem"


def nginx_main_conf(relocation: deploy_doc.Relocation) -> Path:
    """Debian's /etc/nginx/nginx.conf in short: the site enabled as the page links it."""
    root = relocation.root
    conf = root / "nginx-main.conf"
    conf.write_text(
        ("user root;\n" if os.geteuid() == 0 else "")
        + f"pid {root}/nginx.pid;\nerror_log {root}/var/log/nginx/error.log;\nevents {{}}\nhttp {{\n"
        + "".join(f"    {kind}_temp_path {root}/nginx-{kind};\n"
                  for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        + "    access_log off;\n"
        f"    include {relocation.path('/etc/nginx/sites-available/report-console')};\n}}\n"
    )
    return conf


def unit_env(files, relocation, unit: deploy_doc.Unit) -> dict[str, str]:
    env = {"PATH": SYSTEMD_PATH, "LANG": "C.UTF-8", "HOME": str(relocation.root)}
    for env_file in unit.environment_files:
        assert env_file == ENV_FILE, env_file
        env.update(deploy_doc.environment_file(relocation(files[ENV_FILE])))
    env.update({name: relocation(value) for name, value in unit.environment.items()})
    return env


def run_command(markdown: str, relocation, command: str, *extra: str,
                env_extra=None) -> subprocess.CompletedProcess:
    """One of the page's `sudo -u reports report-manage ...` lines, as the test's own user."""
    assert f"\n{command}\n" in markdown, f"docs/deploy.md no longer shows: {command}"
    argv = shlex.split(command.removeprefix("sudo -u reports "))
    assert argv[0] == "report-manage"
    env = {"PATH": SYSTEMD_PATH, "LANG": "C.UTF-8", "HOME": str(relocation.root), **(env_extra or {})}
    done = subprocess.run(["sh", str(relocation.path(MANAGE)), *argv[1:], *extra], env=env,
                          capture_output=True, text=True, timeout=300, start_new_session=True)
    assert done.returncode == 0, f"{command}: {done.stdout[-2000:]}{done.stderr[-3000:]}"
    return done


def test_the_deploy_page_followed_on_one_machine(page, relocation, scratch_database, tmp_path, capsys):
    started_at = time.monotonic()
    markdown, files = page
    units = {path.removeprefix(UNITS): deploy_doc.parse_unit(text) for path, text in files.items()
             if path.startswith(UNITS) and path.endswith(".service")}
    assert PAGE_FILES <= set(files), f"docs/deploy.md lacks {sorted(PAGE_FILES - set(files))}"
    nginx = nginx_binary()
    write_page_files(files, relocation)
    assert not relocation.unused(), f"relocation entries the page no longer needs: {relocation.unused()}"
    certificate = self_signed_certificate(relocation)
    settings = deploy_doc.environment_file(relocation(files[ENV_FILE]))
    processes = Processes(tmp_path)
    sentinels = PageSentinels(relocation, parse_sentinel_url(settings["REDIS_URL"]).password)
    try:
        sentinels.start()
        weed = units["seaweedfs.service"]
        processes.start("seaweedfs", [relocation(arg) for arg in weed.argv()],
                        cwd=relocation(weed.working_directory),
                        env={"PATH": SYSTEMD_PATH, "HOME": str(relocation.root)})
        bucket = settings["AWS_STORAGE_BUCKET_NAME"]
        s3 = boto3.client("s3", endpoint_url=settings["AWS_S3_ENDPOINT_URL"],
                          aws_access_key_id=settings["AWS_ACCESS_KEY_ID"],
                          aws_secret_access_key=settings["AWS_SECRET_ACCESS_KEY"],
                          region_name=settings["AWS_S3_REGION_NAME"],
                          config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))

        def bucket_exists() -> bool:
            assert "seaweedfs" not in processes.exited(), processes.log("seaweedfs")
            try:
                return s3.head_bucket(Bucket=bucket)["ResponseMetadata"]["HTTPStatusCode"] == 200
            except Exception:  # noqa: BLE001 - not listening yet
                return False

        wait_until(bucket_exists, timeout=60, interval=0.2, message="weed to serve the bucket")

        run_command(markdown, relocation, MIGRATE)
        # The rest of the one-off commands side by side (each is mostly Django's start-up).
        with ThreadPoolExecutor(4) as pool:
            collected = pool.submit(run_command, markdown, relocation, COLLECTSTATIC)
            # The page's command asks for the password at a terminal; the test has none.
            operator = pool.submit(run_command, markdown, relocation, CREATE_OPERATOR, "--noinput",
                                   env_extra={"DJANGO_SUPERUSER_PASSWORD": OPERATOR_PASSWORD})
            token = pool.submit(run_command, markdown, relocation, CREATE_TOKEN)
            check = pool.submit(run_command, markdown, relocation, CHECK_DEPLOY)
            listed = pool.submit(run_command, markdown, relocation, CHECK_BUCKET)
        collected.result(), operator.result()
        assert listed.result().stdout.strip().endswith("([], [])"), listed.result().stdout  # an empty bucket
        token = token.result().stdout.strip().splitlines()[-1]
        notes = set(re.findall(r"\((security\.\w+)\)", check.result().stderr))
        assert notes == HSTS_NOTES, notes

        for name, instance in (("report-web.service", ""), ("report-worker@.service", "1"),
                               ("report-worker@.service", "2"), ("report-housekeeper.service", "")):
            unit = units[name]
            label = name.replace("@.service", f"@{instance}").removesuffix(".service")
            processes.start(label, [relocation(arg) for arg in unit.argv(instance)],
                            cwd=relocation(unit.working_directory), env=unit_env(files, relocation, unit))
        processes.start("nginx", [nginx, "-c", str(nginx_main_conf(relocation)), "-g", "daemon off;"],
                        cwd=relocation.root, env={"PATH": SYSTEMD_PATH})

        site = Site(relocation.port(443), certificate)

        def healthy() -> bool:
            assert not processes.exited(), processes.exited()
            try:
                return site.request("GET", "/healthz").status_code == 200
            except requests.ConnectionError:
                return False

        wait_until(healthy, timeout=90, interval=0.3, message="/healthz through nginx")
        serving_at = time.monotonic()
        check_plain_http_and_probes(relocation)
        check_operator_login(site)

        auth = {"Authorization": f"Bearer {token}"}
        before = submit_reports(site, auth, "before")
        check_completed(site, auth, s3, bucket, before)

        old_master = sentinels.master_address()
        killed = time.monotonic()
        sentinels.kill_master()
        promoted = Promotion(sentinels, old_master, killed)
        after = submit_reports(site, auth, "after")
        check_completed(site, auth, s3, bucket, after)
        completed_after_kill = time.monotonic() - killed
        assert promoted.after(), f"no promotion seen: {sentinels.logs()}"
        wait_until(lambda: site.request("GET", "/readyz").status_code == 200, timeout=30, interval=0.5,
                   message="/readyz after the failover")
        assert not processes.exited(), f"exited during the failover: {processes.exited()}"
        workers_log = processes.log("report-worker@1") + processes.log("report-worker@2")
        assert "failover seen" in workers_log, workers_log[-3000:]

        archive = units["report-archive.service"]
        done = subprocess.run([relocation(arg) for arg in archive.argv()],
                              cwd=relocation(archive.working_directory),
                              env=unit_env(files, relocation, archive),
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        stopping_at = time.monotonic()
        lingering = processes.stop()  # systemctl stop: a warm shutdown of each, idle now
        assert not lingering, {name: processes.log(name) for name in lingering}
        with capsys.disabled():
            print(f"\ndeploy page: {2 * TASKS_EACH_SIDE} reports over HTTPS via nginx on PostgreSQL, "
                  f"Redis Sentinel and S3; the replica promoted {promoted.after():.1f} s after the master's "
                  f"SIGKILL, the {TASKS_EACH_SIDE} reports submitted right after the kill all done "
                  f"{completed_after_kill:.1f} s after it; {time.monotonic() - started_at:.0f} s in all "
                  f"(set-up {serving_at - started_at:.0f} s, stop {time.monotonic() - stopping_at:.0f} s)")
    finally:
        processes.stop()
        sentinels.stop()


def check_plain_http_and_probes(relocation) -> None:
    """Port 80 serves the probes and redirects the rest; gunicorn on its own redirects every URL but
    the probes to https (SECURE_SSL_REDIRECT without the proxy); another Host is dropped by nginx."""
    plain = f"http://127.0.0.1:{relocation.port(80)}"
    named = {"Host": PUBLIC_NAME}
    http = requests.Session()
    http.trust_env = False  # no proxy from the environment between the test and nginx
    ready = http.get(f"{plain}/readyz", headers=named, timeout=30)
    assert ready.status_code == 200 and ready.json()["status"] == "ready", ready.text
    redirect = http.get(f"{plain}/console/", headers=named, timeout=30, allow_redirects=False)
    assert (redirect.status_code, redirect.headers["Location"]) == (301, f"https://{PUBLIC_NAME}/console/")
    with pytest.raises(requests.ConnectionError):
        http.get(f"{plain}/readyz", headers={"Host": "10.9.9.9"}, timeout=30)
    gunicorn = f"http://127.0.0.1:{relocation.port(8000)}"
    login = http.get(f"{gunicorn}/console/login/", headers=named, timeout=30, allow_redirects=False)
    assert (login.status_code, login.headers["Location"]) == (301, f"https://{PUBLIC_NAME}/console/login/")
    assert http.get(f"{gunicorn}/healthz", headers=named, timeout=30).status_code == 200


def check_operator_login(site: Site) -> None:
    """The first operator logs in over HTTPS: CSRF, secure cookies and the proxy headers agree."""
    form = site.request("GET", "/console/login/")
    assert form.status_code == 200, form.text[:500]
    csrf = site.session.cookies["csrftoken"]
    answer = site.request("POST", "/console/login/",
                          headers={"Referer": f"https://{site.host}/console/login/"},
                          data={"username": "alice", "password": OPERATOR_PASSWORD,
                                "csrfmiddlewaretoken": csrf})
    assert (answer.status_code, answer.headers.get("Location")) == (302, "/console/"), answer.text[:500]
    assert site.request("GET", "/console/").status_code == 200


def submit_reports(site: Site, auth: dict, label: str) -> list[str]:
    ids = []
    for number in range(TASKS_EACH_SIDE):
        params = {"format": ("csv", "xlsx")[number % 2],
                  "group_by": ("region", "product", "month")[number % 3]}
        body = {"kind": "sales_summary", "params": params, "idempotency_key": f"deploy-{label}-{number}"}
        answer = site.request("POST", "/report/task/submit", json=body, headers=auth)
        assert answer.status_code == 201, answer.text[:500]
        ids.append(answer.json()["task_id"])
    return ids


def check_completed(site: Site, auth: dict, s3, bucket: str, task_ids: list[str]) -> None:
    """Every task done, its file in the bucket, and the same bytes downloadable through nginx."""
    for task_id in task_ids:
        def finished(task_id=task_id):
            status = site.request("GET", f"/report/task/{task_id}/status", headers=auth)
            assert status.status_code == 200, status.text[:500]
            assert status.json()["status"] != "dead", status.json()
            return status.json() if status.json()["status"] == "done" else None

        status = wait_until(finished, timeout=90, interval=0.3, message=f"task {task_id} to be done")
        stored = s3.get_object(Bucket=bucket, Key=status["output_path"])["Body"].read()
        download = site.request("GET", site.public_path(status["download_url"]), headers=auth)
        assert download.status_code == 200, download.text[:500]
        assert download.content == stored and stored, status
