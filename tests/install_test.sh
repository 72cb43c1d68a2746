#!/usr/bin/env bash
# `make install` into a scratch DESTDIR: every file lands under PREFIX, the
# installed binary runs, `man stagedrain` finds a page that documents every
# flag --help lists, and the example systemd unit verifies.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=$(mktemp -d "${TMPDIR:-/tmp}/stagedrain-install.XXXXXX")
trap 'rm -rf "$dest"' EXIT
fail() { echo "install_test: $*" >&2; exit 1; }

make -s install DESTDIR="$dest" PREFIX=/opt/stagedrain >/dev/null
p=$dest/opt/stagedrain
for f in bin/stagedrain share/man/man1/stagedrain.1 share/stagedrain/sql/roles.sql \
	share/stagedrain/examples/stagedrain.service share/stagedrain/examples/stagedrain.env; do
	[ -f "$p/$f" ] || fail "missing $f"
done
for f in sql/[0-9]*.sql; do
	cmp -s "$f" "$p/share/stagedrain/$f" || fail "$f not installed"
done
[ -x "$p/bin/stagedrain" ] || fail "bin/stagedrain is not executable"
"$p/bin/stagedrain" --version | grep -q '^stagedrain ' || fail "installed binary does not run"
# Nothing lands outside DESTDIR/PREFIX.
extra=$(cd "$dest" && find . -type f ! -path './opt/stagedrain/*')
[ -z "$extra" ] || fail "files outside PREFIX: $extra"

MANPATH="$p/share/man" MANWIDTH=100 man stagedrain >"$dest/man.txt" 2>"$dest/man.err" ||
	fail "man stagedrain: $(cat "$dest/man.err")"
grep -q 'stagedrain .*relay jobs staged in PostgreSQL' "$dest/man.txt" || fail "man page has no NAME line"
n=0
for flag in $("$p/bin/stagedrain" --help | grep -o -- '--[a-z][a-z-]*' | sort -u); do
	grep -q -- "$flag" "$dest/man.txt" || fail "man page lacks $flag, which --help lists"
	n=$((n + 1))
done
[ "$n" -ge 20 ] || fail "--help listed only $n flags"
for v in $("$p/bin/stagedrain" --help | grep -o 'STAGEDRAIN_[A-Z_]*' | sort -u); do
	grep -q -- "$v" "$dest/man.txt" || fail "man page lacks $v, which --help lists"
done
if command -v mandoc >/dev/null; then
	mandoc -Tlint -W warning "$p/share/man/man1/stagedrain.1" || fail "mandoc -Tlint found problems"
fi

# The unit as installed, pointed at the installed binary and page.
if command -v systemd-analyze >/dev/null; then
	sed "s|^ExecStart=/usr/local/bin/stagedrain|ExecStart=$p/bin/stagedrain|" \
		"$p/share/stagedrain/examples/stagedrain.service" >"$dest/stagedrain.service"
	grep -q '^Restart=always$' "$dest/stagedrain.service" || fail "unit lacks Restart=always"
	MANPATH="$p/share/man" systemd-analyze verify "$dest/stagedrain.service" ||
		fail "systemd-analyze verify failed"
else
	echo "install_test: systemd-analyze not found; unit not verified" >&2
fi

# The image's build stage, without Docker: build from exactly what
# docker/Dockerfile copies, install as it does, and check that every library
# the binary needs comes from a package its final stage installs.
py=python3
[ ! -x /usr/bin/python3 ] || py=/usr/bin/python3
image=$("$py" tests/docker_check.py --image docker/Dockerfile)
mkdir "$dest/src"
for src in $(echo "$image" | "$py" -c 'import json, sys; print(" ".join(json.load(sys.stdin)["build_copies"]))'); do
	cp -r "$src" "$dest/src/"
done
# A plain build as the image makes it: not the sanitizer build `make test SAN=1`
# passes down (through MAKEFLAGS and the environment).
(cd "$dest/src" && unset MAKEFLAGS MAKELEVEL MFLAGS SAN && make -s all >/dev/null &&
	make -s install PREFIX=/usr/local DESTDIR="$dest/image" >/dev/null) ||
	fail "the image's build stage fails with only the files docker/Dockerfile copies"
[ -x "$dest/image/usr/local/bin/stagedrain" ] || fail "the image's build stage installs no binary"
runtime=$(echo "$image" | "$py" -c 'import json, sys; print(" ".join(json.load(sys.stdin)["runtime_packages"]))')
for lib in $(objdump -p "$dest/image/usr/local/bin/stagedrain" | awk '/NEEDED/ { print $2 }'); do
	pkg=$(dpkg -S "*/$lib" 2>/dev/null | head -n 1 | cut -d: -f1)
	case " $runtime libc6 " in
	*" $pkg "*) ;;
	*) fail "the binary needs $lib (Debian package ${pkg:-unknown}), which the image does not install" ;;
	esac
done

make -s uninstall DESTDIR="$dest" PREFIX=/opt/stagedrain
left=$(cd "$dest" && find ./opt -type f)
[ -z "$left" ] || fail "uninstall left: $left"
echo "install_test: binary, man page ($n flags), SQL and systemd example install and uninstall cleanly;"
echo "install_test: the image's build stage builds from what docker/Dockerfile copies, and it installs every library"
