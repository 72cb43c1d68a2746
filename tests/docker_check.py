#!/usr/bin/env python3
"""Checks docker/ where no Docker engine runs: the Dockerfiles against the
hadolint rules that apply to them (hadolint is not packaged for Debian), and
the compose file's structure. With --service NAME, prints that service's
command and environment as compose would hand them to the container (JSON),
for the integration test that runs them against local servers.

  docker_check.py docker/Dockerfile docker/docker-compose.yml
  docker_check.py --service relay docker/docker-compose.yml
  docker_check.py --image docker/Dockerfile   (what the build stage copies; the
                                               final stage's packages: JSON)
"""
import json
import os
import re
import shlex
import subprocess
import sys
import urllib.parse

import yaml

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
problems = []


def problem(where, rule, text):
    problems.append(f"{where}: {rule}: {text}")


# ---- Dockerfiles ----

def instructions(path):
    """(line number, INSTRUCTION, arguments) with continuation lines joined."""
    out, buf, start = [], "", 0
    with open(path) as f:
        for n, raw in enumerate(f, 1):
            line = raw.rstrip("\n")
            if not buf and (not line.strip() or line.lstrip().startswith("#")):
                continue
            if not buf:
                start = n
            if line.endswith("\\"):
                buf += line[:-1] + " "
                continue
            buf += line
            word, _, rest = buf.strip().partition(" ")
            out.append((start, word.upper(), rest.strip()))
            buf = ""
    return out


def stages(instrs):
    """Splits instructions at each FROM: [(from args, [instructions])]."""
    out = []
    for ins in instrs:
        if ins[1] == "FROM":
            out.append((ins, []))
        elif out:
            out[-1][1].append(ins)
    return out


def expand_args(text, args):
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args.get(m.group(1) or m.group(2), m.group(0)), text)


def shellcheck(where, script):
    """hadolint runs shellcheck on every RUN; so do we, when it is installed."""
    try:
        r = subprocess.run(["shellcheck", "-s", "sh", "-"], input=script, capture_output=True, text=True)
    except FileNotFoundError:
        return
    if r.returncode != 0:
        problem(where, "shellcheck", r.stdout.strip().replace("\n", " | "))


def check_dockerfile(path, sidecar):
    name = os.path.relpath(path, ROOT)
    instrs = instructions(path)
    args = {}
    for _, word, rest in instrs:
        if word == "ARG" and "=" in rest:
            k, v = rest.split("=", 1)
            args.setdefault(k, v)
        if word == "FROM":
            break
    st = stages(instrs)
    if not st:
        problem(name, "DL3000", "no FROM")
        return
    names = set()
    for (n, _, rest), body in st:
        image = expand_args(rest.split()[0], args)
        if "AS" in rest.upper().split():
            names.add(rest.split()[-1])
        if image in names:
            continue
        if not qualified(image):
            problem(f"{name}:{n}", "qualified", f"base image {image} is not fully qualified (docker.io/library/...): "
                    "podman and buildah resolve a short name only through registries.conf")
        if ":" not in image or "$" in image:
            problem(f"{name}:{n}", "DL3006", f"base image {image} has no fixed tag")
        elif image.endswith(":latest"):
            problem(f"{name}:{n}", "DL3007", f"base image {image} uses latest")
        for ln, word, rest in body:
            where = f"{name}:{ln}"
            if word == "ADD" and not re.match(r"https?://", rest.split()[0]):
                problem(where, "DL3020", "COPY, not ADD, for local files")
            if word in ("CMD", "ENTRYPOINT") and not rest.startswith("["):
                problem(where, "DL3025", f"{word} in exec (JSON) form")
            if word != "RUN":
                continue
            if re.search(r"(^|[;&|]\s*)cd\s", rest):
                problem(where, "DL3003", "WORKDIR, not cd")
            if "|" in rest.replace("||", "") and "pipefail" not in rest:
                problem(where, "DL4006", "a pipe without set -o pipefail")
            if "apt-get install" in rest:
                if "--no-install-recommends" not in rest:
                    problem(where, "DL3015", "apt-get install without --no-install-recommends")
                if not re.search(r"install\s+(-\w*y|--yes|-y)", rest) and " -y " not in rest:
                    problem(where, "DL3014", "apt-get install without -y")
                if "rm -rf /var/lib/apt/lists" not in rest:
                    problem(where, "DL3009", "apt lists not removed in the same RUN")
            if re.search(r"\bapt\s+(install|update)", rest):
                problem(where, "DL3027", "apt-get, not apt")
            if "gem install" in rest and not re.search(r"gem install .*(-v|--version)", rest):
                problem(where, "DL3028", "gem install without a version")
            shellcheck(where, rest + "\n")
    final = st[-1][1]
    users = [rest for _, word, rest in final if word == "USER"]
    if not users or users[-1].split(":")[0] in ("root", "0"):
        problem(name, "DL3002", "the last stage must switch to a non-root USER")
    else:
        check_user_ids(name, users[-1], final)
    if not any(word == "ENTRYPOINT" for _, word, _ in final):
        problem(name, "entrypoint", "the last stage has no ENTRYPOINT")
    if sidecar:
        check_sidecar_image(name, st, final)


def qualified(image):
    """registry/path:tag, as podman needs without a search list: docker.io/library/x, localhost/x."""
    first = image.split("/")[0]
    return "/" in image and ("." in first or ":" in first or first == "localhost")


# useradd's and groupadd's options that take a value (shadow 4.13).
VALUED = {"-u", "--uid", "-g", "--gid", "-d", "--home-dir", "-s", "--shell", "-c", "--comment",
          "-G", "--groups", "-k", "--skel", "-K", "--key", "-e", "--expiredate", "-f", "--inactive",
          "-p", "--password", "-R", "--root", "-P", "--prefix", "-Z", "--selinux-user", "-b", "--base-dir"}


def account_commands(body, program):
    """Each `program` (useradd, groupadd) the stage runs: ({option: value}, name)."""
    out = []
    for _, word, rest in body:
        if word != "RUN":
            continue
        for cmd in re.split(r"&&|\|\||;", rest):
            words = shlex.split(cmd)
            if not words or words[0] != program:
                continue
            opts, args, it = {}, [], iter(words[1:])
            for w in it:
                if w.startswith("--") and "=" in w:
                    k, v = w.split("=", 1)
                    opts[k] = v
                elif w in VALUED:
                    opts[w] = next(it, "")
                elif w.startswith("-"):
                    opts[w] = True
                else:
                    args.append(w)
            out.append((opts, args[-1] if args else ""))
    return out


def opt(opts, short, long):
    return opts.get(long, opts.get(short))


def check_user_ids(name, user, final):
    """USER uid:gid, numeric (a runtime tells it is not root without reading the
    image), and both ids have entries the last stage makes: a process whose gid
    has no /etc/group line is what useradd --user-group left (it picks the gid)."""
    uid, _, gid = user.partition(":")
    if not uid.isdigit() or not gid.isdigit():
        problem(name, "user-ids", f"USER {user}: must be numeric uid:gid")
        return
    groups = {opt(o, "-g", "--gid"): g for o, g in account_commands(final, "groupadd")}
    users = {opt(o, "-u", "--uid"): o for o, _ in account_commands(final, "useradd")}
    if gid not in groups:
        problem(name, "user-ids", f"USER {user}: gid {gid} has no /etc/group entry (groupadd --gid {gid} NAME)")
    if uid not in users:
        problem(name, "user-ids", f"USER {user}: uid {uid} has no /etc/passwd entry (useradd --uid {uid})")
        return
    opts = users[uid]
    if opt(opts, "-U", "--user-group"):
        problem(name, "user-ids", f"useradd --uid {uid} --user-group picks its group's gid itself, not {gid}")
    primary = opt(opts, "-g", "--gid")
    if primary not in (gid, groups.get(gid)):
        problem(name, "user-ids", f"useradd --uid {uid}: its primary group must be gid {gid} (--gid {gid})")


# Runtime packages of the build stage's -dev packages (Debian bookworm).
RUNTIME = {"libpq-dev": "libpq5", "libhiredis-dev": "libhiredis0.14", "libjansson-dev": "libjansson4",
           "libmicrohttpd-dev": "libmicrohttpd12", "libssl-dev": "libssl3"}
# The -dev package of a pkg-config name in the Makefile's LIBS_PC, where it is not lib<name>-dev.
DEV = {"openssl": "libssl-dev"}


def apt_packages(body):
    pkgs = set()
    for _, word, rest in body:
        for m in re.finditer(r"apt-get install ([^&;]*)", rest if word == "RUN" else ""):
            pkgs.update(w for w in m.group(1).split() if not w.startswith("-"))
    return pkgs


def check_sidecar_image(name, st, final):
    """stagedrain's own image: multi-stage, only runtime libraries, probes /healthz."""
    if len(st) < 2:
        problem(name, "multi-stage", "build and run in separate stages")
    build_pkgs, run_pkgs = apt_packages(st[0][1]), apt_packages(final)
    with open(os.path.join(ROOT, "Makefile")) as f:
        libs = re.search(r"^LIBS_PC = (.*)$", f.read(), re.M).group(1).split()
    for lib in libs:
        dev = DEV.get(lib, f"{lib if lib.startswith('lib') else 'lib' + lib}-dev")
        if dev not in build_pkgs:
            problem(name, "libraries", f"build stage lacks {dev} (Makefile links {lib})")
        elif RUNTIME.get(dev) not in run_pkgs:
            problem(name, "libraries", f"final stage lacks the runtime package of {dev}")
    if "ca-certificates" not in run_pkgs:
        problem(name, "libraries", "final stage lacks ca-certificates: a rediss:// URL is verified against the system CAs")
    extra = {p for p in run_pkgs if p.endswith("-dev") or p in ("gcc", "make", "pkg-config", "libc6-dev")}
    if extra:
        problem(name, "size", f"final stage installs build tools: {' '.join(sorted(extra))}")
    health = [rest for _, word, rest in final if word == "HEALTHCHECK"]
    if not health or "/healthz" not in health[-1]:
        problem(name, "healthcheck", "no HEALTHCHECK probing /healthz")
    ep = [rest for _, word, rest in final if word == "ENTRYPOINT"]
    if ep and json.loads(ep[-1])[0] != "stagedrain":
        problem(name, "entrypoint", "ENTRYPOINT must be stagedrain")
    if not any(w == "COPY" and "--from=" in r for _, w, r in final):
        problem(name, "multi-stage", "final stage does not copy the build stage's output")


# ---- compose ----

def unescape(value, where):
    """Compose interpolates $VAR and ${VAR} from the host and turns $$ into $.
    This example must not depend on the host's environment."""
    if isinstance(value, list):
        return [unescape(v, where) for v in value]
    value = str(value)
    if re.search(r"(?<!\$)\$(?!\$)", value.replace("$$", "")):
        problem(where, "interpolation", f"{value!r} takes a value from the host; write $$ for a literal $")
    return value.replace("$$", "$")


def service_env(svc, where):
    env = svc.get("environment") or {}
    if isinstance(env, list):
        env = dict(e.split("=", 1) for e in env)
    return {k: unescape(v, where) for k, v in env.items()}


def url_host(url):
    return urllib.parse.urlsplit(url).hostname


def mount_of(svc, volume):
    """Where service svc mounts the named volume, or None."""
    for v in svc.get("volumes") or []:
        if isinstance(v, dict):
            if v.get("type", "volume") == "volume" and v.get("source") == volume:
                return v.get("target")
        elif str(v).split(":")[0] == volume and ":" in str(v):
            return str(v).split(":")[1]
    return None


def flag_value(argv, flag):
    """The argument after flag in a command list, or None."""
    argv = [str(a) for a in argv] if isinstance(argv, list) else shlex.split(str(argv))
    return argv[argv.index(flag) + 1] if flag in argv[:-1] else None


def in_volume(where, what, file, svc, svcs, volume):
    """file must lie in the named volume as svc mounts it, and be a file the
    service that fills that volume writes (named in its script)."""
    mount = mount_of(svc, volume)
    if not file or not mount:
        problem(where, "tls", f"{what}: {file!r} is not in the {volume} volume (mounted at {mount!r})")
        return
    rel = os.path.relpath(file, mount)
    if rel.startswith(".."):
        problem(where, "tls", f"{what}: {file} is outside the {volume} volume, mounted at {mount}")
    elif not re.search(rf"-out\s+{re.escape(rel)}\b|-keyout\s+{re.escape(rel)}\b",
                       json.dumps(svcs["certs"].get("command"))):
        problem(where, "tls", f"{what}: certs does not write {rel}")


def check_tls(name, svcs, env, volumes):
    """Redis is TLS-only; the relay and the worker verify it against the CA the
    one-shot certs service makes into a named volume."""
    certs, redis, relay, worker = svcs["certs"], svcs["redis"], svcs["relay"], svcs["worker"]
    volume = next((str(v).split(":")[0] for v in certs.get("volumes") or [] if not isinstance(v, dict)), None)
    if not volume or volume not in volumes:
        problem(f"{name}: certs", "tls", "must write into a named volume (top-level volumes:)")
        return
    script = json.dumps(certs.get("command")) + json.dumps(certs.get("entrypoint"))
    if "openssl req" not in script or "openssl x509" not in script:
        problem(f"{name}: certs", "tls", "must make the CA and the server certificate with the openssl command")
    if certs.get("restart", "no") != "no":
        problem(f"{name}: certs", "restart", "a one-shot service must not be restarted")
    if "DNS:redis" not in script:
        problem(f"{name}: certs", "tls", "the server certificate must carry the name redis (subjectAltName)")
    cmd = redis.get("command") or []
    tls_port = flag_value(cmd, "--tls-port")
    if flag_value(cmd, "--port") != "0" or not tls_port:
        problem(f"{name}: redis", "tls", "must listen on --tls-port only (--port 0)")
    for flag in ("--tls-cert-file", "--tls-key-file", "--tls-ca-cert-file"):
        in_volume(f"{name}: redis", flag, flag_value(cmd, flag), redis, svcs, volume)
    if (redis.get("depends_on") or {}).get("certs", {}).get("condition") != "service_completed_successfully":
        problem(f"{name}: redis", "depends_on", "must wait for certs to complete")
    health = (redis.get("healthcheck") or {}).get("test") or []
    if "--tls" not in health or not flag_value(health, "--cacert"):
        problem(f"{name}: redis", "healthcheck", "must ping over TLS, verifying the CA (--tls --cacert)")
    else:
        in_volume(f"{name}: redis", "healthcheck --cacert", flag_value(health, "--cacert"), redis, svcs, volume)
    url = urllib.parse.urlsplit(env.get("STAGEDRAIN_REDIS_URL", ""))
    if url.scheme != "rediss" or str(url.port or 6379) != tls_port:
        problem(f"{name}: relay", "tls", f"STAGEDRAIN_REDIS_URL must be rediss:// to redis's --tls-port {tls_port}")
    ca = env.get("STAGEDRAIN_REDIS_TLS_CA_FILE")
    in_volume(f"{name}: relay", "STAGEDRAIN_REDIS_TLS_CA_FILE", ca, relay, svcs, volume)
    if ca and ca != flag_value(cmd, "--tls-ca-cert-file"):
        problem(f"{name}: relay", "tls", "STAGEDRAIN_REDIS_TLS_CA_FILE must be the CA that signed redis's certificate")
    if env.get("STAGEDRAIN_REDIS_TLS_INSECURE") or "--redis-tls-insecure" in json.dumps(relay.get("command")):
        problem(f"{name}: relay", "tls", "an example must verify the server, not --redis-tls-insecure")
    wenv = service_env(worker, name)
    if wenv.get("REDIS_TLS_CA_FILE") != ca:
        problem(f"{name}: worker", "tls", "REDIS_TLS_CA_FILE must be the relay's STAGEDRAIN_REDIS_TLS_CA_FILE")
    in_volume(f"{name}: worker", "REDIS_TLS_CA_FILE", wenv.get("REDIS_TLS_CA_FILE"), worker, svcs, volume)
    with open(os.path.join(ROOT, "docker", "worker", "worker.rb")) as f:
        rb = f.read()
    if "REDIS_TLS_CA_FILE" not in rb or "ssl_params" not in rb or "ca_file" not in rb:
        problem("docker/worker/worker.rb", "tls", "must pass REDIS_TLS_CA_FILE to Sidekiq's Redis as ssl_params ca_file")


def check_compose(path):
    name = os.path.relpath(path, ROOT)
    with open(path) as f:
        doc = yaml.safe_load(f)
    svcs = doc.get("services") or {}
    for need in ("certs", "postgres", "redis", "migrate", "relay", "app", "worker"):
        if need not in svcs:
            problem(name, "services", f"no {need} service")
    if problems:
        return
    for sname, svc in svcs.items():
        where = f"{name}: {sname}"
        image = svc.get("image", "")
        if not image:
            problem(where, "image", "no image: name it, fully qualified (localhost/... for one built here)")
            continue
        if ":" not in image.rpartition("/")[2] or image.endswith(":latest"):
            problem(where, "image", f"{image!r} has no fixed tag")
        # podman-compose resolves a short name only through registries.conf.
        if not qualified(image):
            problem(where, "image", f"{image!r} is not fully qualified (docker.io/library/..., localhost/...)")
        elif svc.get("build") and not image.startswith("localhost/"):
            problem(where, "image", f"{image!r} is built here: name it localhost/..., as podman does")
        deps = svc.get("depends_on") or {}
        for dep in deps:
            if dep not in svcs:
                problem(where, "depends_on", f"unknown service {dep}")
        for k in ("command", "entrypoint"):
            if k in svc:
                unescape(svc[k], where)
        service_env(svc, where)
    built = {s.get("image") for s in svcs.values() if s.get("build")}
    relay, migrate = svcs["relay"], svcs["migrate"]
    b = migrate.get("build") or {}
    if os.path.abspath(os.path.join(os.path.dirname(path), b.get("context", ""), b.get("dockerfile", ""))) != \
            os.path.join(ROOT, "docker", "Dockerfile"):
        problem(f"{name}: migrate", "build", "must build docker/Dockerfile from the repository root")
    if relay.get("image") != migrate.get("image") or relay.get("image") not in built:
        problem(f"{name}: relay", "image", "must run the image migrate builds")
    if migrate.get("command") != ["migrate"]:
        problem(f"{name}: migrate", "command", "must be [migrate]")
    if (relay.get("depends_on") or {}).get("migrate", {}).get("condition") != "service_completed_successfully":
        problem(f"{name}: relay", "depends_on", "must wait for migrate to complete")
    if relay.get("restart") not in ("always", "unless-stopped"):
        problem(f"{name}: relay", "restart", "a relay that exits must be restarted")
    if not isinstance(relay.get("command", []), list):
        problem(f"{name}: relay", "command", "must be a list (exec form)")
    env = service_env(relay, f"{name}: relay")
    if url_host(env.get("STAGEDRAIN_PG_URL", "")) != "postgres":
        problem(f"{name}: relay", "environment", "STAGEDRAIN_PG_URL must point at the postgres service")
    if url_host(env.get("STAGEDRAIN_REDIS_URL", "")) != "redis":
        problem(f"{name}: relay", "environment", "STAGEDRAIN_REDIS_URL must point at the redis service")
    if service_env(migrate, name).get("STAGEDRAIN_PG_URL") != env.get("STAGEDRAIN_PG_URL"):
        problem(f"{name}: migrate", "environment", "must migrate the database the relay drains")
    port = env.get("STAGEDRAIN_HTTP_ADDR", "").rpartition(":")[2]
    if not port or not any(str(p).endswith(f":{port}") for p in relay.get("ports", [])):
        problem(f"{name}: relay", "ports", "must publish the port of STAGEDRAIN_HTTP_ADDR")
    for p in relay.get("ports", []):
        if not str(p).startswith("127.0.0.1:"):
            problem(f"{name}: relay", "ports", f"{p} publishes metrics beyond this machine")
    worker = svcs["worker"]
    if service_env(worker, name).get("REDIS_URL") != env.get("STAGEDRAIN_REDIS_URL"):
        problem(f"{name}: worker", "environment", "REDIS_URL must be the relay's STAGEDRAIN_REDIS_URL")
    check_tls(name, svcs, env, doc.get("volumes") or {})
    app_text = json.dumps(svcs["app"].get("command"))
    queues = [a for i, a in enumerate(worker.get("command", [])) if i and worker["command"][i - 1] == "-q"]
    for q in re.findall(r"SELECT '([\w-]+)', '\w+'", app_text):
        if q not in queues:
            problem(f"{name}: worker", "queues", f"does not work queue {q!r}, which the app stages to")


def print_service(path, sname):
    with open(path) as f:
        svc = yaml.safe_load(f)["services"][sname]
    out = {"entrypoint": unescape(svc.get("entrypoint", []), sname),
           "command": unescape(svc.get("command", []), sname),
           "environment": service_env(svc, sname)}
    if isinstance(out["command"], str):
        out["command"] = shlex.split(out["command"])
    print(json.dumps(out))


def print_image(path):
    st = stages(instructions(path))
    copies = [r.split()[:-1] for _, w, r in st[0][1] if w == "COPY" and "--from" not in r]
    print(json.dumps({"build_copies": [src for c in copies for src in c],
                      "runtime_packages": sorted(apt_packages(st[-1][1]))}))


def main(argv):
    if len(argv) == 3 and argv[0] == "--service":
        print_service(argv[2], argv[1])
    elif len(argv) == 2 and argv[0] == "--image":
        print_image(argv[1])
    elif len(argv) == 2:
        check_dockerfile(argv[0], sidecar=True)
        check_dockerfile(os.path.join(os.path.dirname(argv[0]), "worker", "Dockerfile"), sidecar=False)
        check_compose(argv[1])
    else:
        sys.exit(__doc__)
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        return 1
    if len(argv) == 2 and not argv[0].startswith("--"):
        print(f"docker_check: {argv[0]}, its worker image and {argv[1]} pass")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
