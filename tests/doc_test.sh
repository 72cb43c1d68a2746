#!/usr/bin/env bash
# Under tests/services.sh: runs every command the documentation marks runnable,
# so the docs cannot drift from the code (make doc-test).
#
# In README.md, docs/*.md and clients/*/README.md, a fence opened with "```sh doctest" runs, and so
# does a hidden block (a line "<!-- doctest", its lines, a line "-->"); other
# fences do not. Either may be indented (in a list item): the opening line's
# indent is taken off its lines. A page's runnable lines run in order as ONE
# bash -Eeuo pipefail script, in a fresh directory (holding sql/, a link to the
# repository's), with a fresh database that `stagedrain migrate` has set up
# (a client's README: an empty one, as its framework's migration sets it up)
# and a flushed Redis: PATH starts with the built stagedrain; STAGEDRAIN_PG_URL,
# DATABASE_URL, STAGEDRAIN_REDIS_URL, REDIS_URL and PGHOST, PGPORT, PGUSER (a
# superuser), PGDATABASE name them; STAGEDRAIN_REPO is the repository's root.
# A page has 60 s; a client's README, which makes a framework's app, 300 s.
# Background jobs a page starts are stopped when it ends; its database and the
# roles it created are dropped.
#
# Then the drift checks: the settings table of docs/operating.md lists exactly
# the flags of `stagedrain --help`; the roles table of docs/security.md names
# every privilege sql/roles.sql grants; docs/staging.md's table every column of
# staged_jobs; the README's introduction names every format; every relative
# link leads to a file and heading that exist. A failure names the page, the
# line in it, the command and its output.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${TEST_PG_URL:?run under tests/services.sh}" "${TEST_REDIS_URL:?}" "${STAGEDRAIN_BIN:?}"

repo=$(pwd)
work=$(mktemp -d "${TEST_DIR:-/tmp}/doctest.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir "$work/bin"
ln -s "$(readlink -f "$STAGEDRAIN_BIN")" "$work/bin/stagedrain"
hostport=${TEST_PG_URL#postgresql://postgres@}
hostport=${hostport%%/*}
pg_url() { echo "postgresql://postgres@$hostport/$1"; }
sql() { psql -X -q -v ON_ERROR_STOP=1 -d "$TEST_PG_URL" "$@"; }
roles_before=$(sql -At -c "SELECT rolname FROM pg_roles ORDER BY 1")
failed=0 passed=0

fail() {
	echo "doc_test: FAIL: $*" >&2
	failed=$((failed + 1))
}

# extract PAGE: its runnable lines as "MDLINE<TAB>BLOCKLINE<TAB>TEXT".
extract() {
	awk '
		function open(m) { mode = m; start = NR; match($0, /^[ \t]*/); indent = substr($0, 1, RLENGTH) }
		mode == "" && /^[ \t]*```sh doctest[ \t]*$/ { open("fence"); next }
		mode == "" && /^[ \t]*<!-- doctest[ \t]*$/ { open("hidden"); next }
		mode == "" && /^[ \t]*```/ { mode = "other"; next }
		mode == "fence" && /^[ \t]*```[ \t]*$/ { mode = ""; next }
		mode == "hidden" && /^[ \t]*-->[ \t]*$/ { mode = ""; next }
		mode == "other" && /^[ \t]*```/ { mode = ""; next }
		mode == "fence" || mode == "hidden" {
			line = $0
			if (substr(line, 1, length(indent)) == indent) line = substr(line, length(indent) + 1)
			print NR "\t" start "\t" line
		}
	' "$1"
}

# A fresh database and Redis for one page, its script, then cleanup.
run_page() {
	local page=$1 n=$2 db dir lines status limit=60
	[[ $page != clients/* ]] || limit=300
	db=doctest_$n dir=$work/page$n
	lines=$(extract "$page")
	[ -n "$lines" ] || return 0
	mkdir "$dir"
	ln -s "$repo/sql" "$dir/sql"
	sql -c "CREATE DATABASE $db"
	if [[ $page != clients/* ]] && ! "$work/bin/stagedrain" migrate --pg-url "$(pg_url "$db")" >"$dir/migrate.log" 2>&1; then
		cat "$dir/migrate.log" >&2
		fail "$page: migrate"
		return 0
	fi
	redis-cli -u "$TEST_REDIS_URL" FLUSHALL >/dev/null
	{
		# Lines 1-4: the prologue; line 4 + k is the page's k-th runnable line.
		cat <<-'EOF'
			set -E; trap 's=$?; printf "%s\t%s\t%s\n" "$LINENO" "$s" "$BASH_COMMAND" >>"$DOCTEST_FAIL"' ERR
			trap 'trap - ERR; kill $(jobs -p) 2>/dev/null || true; wait || true' EXIT
			trap 'exit 143' TERM
			exec </dev/null
		EOF
		printf '%s\n' "$lines" | cut -f3-
	} >"$dir/page.sh"
	status=0 SECONDS=0
	(cd "$dir" && for v in $(compgen -e | grep '^STAGEDRAIN_'); do unset "$v"; done &&
		env PATH="$work/bin:$PATH" DOCTEST_FAIL="$dir/fail" \
		STAGEDRAIN_PG_URL="$(pg_url "$db")" DATABASE_URL="$(pg_url "$db")" \
		STAGEDRAIN_REDIS_URL="$TEST_REDIS_URL" REDIS_URL="$TEST_REDIS_URL" STAGEDRAIN_REPO="$repo" \
		PGHOST="${hostport%:*}" PGPORT="${hostport##*:}" PGUSER=postgres PGDATABASE="$db" \
		timeout -k 5 "$limit" bash -euo pipefail page.sh >"$dir/out.log" 2>&1) || status=$?
	if [ "$status" = 0 ]; then
		echo "doc_test: $page ran as written ($SECONDS s)"
		passed=$((passed + 1))
	else
		report "$page" "$dir" "$status" "$lines"
	fi
	sql -c "DROP DATABASE $db WITH (FORCE)"
	drop_new_roles
}

# report PAGE DIR STATUS LINES: where it failed, in the .md file's lines.
report() {
	local page=$1 dir=$2 status=$3 lines=$4 at k md block
	at=$(head -n 1 "$dir/fail" 2>/dev/null || true)
	# bash's own errors (an unbound variable, a syntax error) skip the ERR trap
	# but name the script's line.
	if [ -z "$at" ] && k=$(grep -m 1 -oE '^page\.sh: line [0-9]+:' "$dir/out.log"); then
		k=${k#page.sh: line }
		at="${k%:}	$status	$(grep -m 1 '^page\.sh: line' "$dir/out.log")"
	fi
	if [ -n "$at" ]; then
		k=$(($(cut -f1 <<<"$at") - 4))
		md=$(sed -n "${k}p" <<<"$lines" | cut -f1)
		block=$(sed -n "${k}p" <<<"$lines" | cut -f2)
		fail "$page:$md (the block at line $block): exit $(cut -f2 <<<"$at"): $(cut -f3- <<<"$at")"
	elif [ "$status" = 124 ] || [ "$status" = 137 ]; then
		fail "$page: took longer than $limit s"
	else
		fail "$page: exit $status"
	fi
	echo "--- its output (last 40 lines):" >&2
	tail -n 40 "$dir/out.log" >&2
	echo "---" >&2
}

drop_new_roles() {
	local r
	for r in $(comm -13 <(echo "$roles_before") <(sql -At -c "SELECT rolname FROM pg_roles ORDER BY 1")); do
		sql -c "DROP ROLE \"$r\""
	done
}

# Every flag of --help is a row of the settings table, and every row a flag.
check_settings() {
	local help table
	help=$("$STAGEDRAIN_BIN" --help | sed -nE 's/^  (-[a-zA-Z], )?(--[a-z0-9-]+).*/\2/p' |
		grep -vxE -- '--help|--version' | sort -u)
	table=$(awk '/^## Settings/ { f = 1; next } f && /^## / { exit } f' docs/operating.md |
		sed -nE 's/^\| .(--[a-z0-9-]+).*/\1/p' | sort -u)
	if [ "$help" != "$table" ]; then
		fail "docs/operating.md's settings table and stagedrain --help differ (< --help only, > table only):"
		diff <(echo "$help") <(echo "$table") | grep '^[<>]' >&2 || true
	fi
}

# What sql/roles.sql grants, read from a database it ran in: each privilege on
# a table or sequence (columns listed) must be one ;-separated clause of that
# role's row in docs/security.md, naming the privilege, the object and columns.
# And every column of staged_jobs is a row of docs/staging.md's table.
check_schema() {
	local db=doctest_roles grants columns role obj priv cols row clause ok c
	sql -c "CREATE DATABASE $db"
	"$STAGEDRAIN_BIN" migrate --pg-url "$(pg_url $db)" >/dev/null 2>&1
	psql -X -q -v ON_ERROR_STOP=1 -d "$(pg_url $db)" -f sql/roles.sql >/dev/null
	grants=$(psql -X -qAt -F $'\t' -d "$(pg_url $db)" -c "
		SELECT r.rolname, c.relname, a.privilege_type, ''
		  FROM pg_class c, aclexplode(c.relacl) a JOIN pg_roles r ON r.oid = a.grantee
		 WHERE r.rolname LIKE 'stagedrain\_%'
		UNION ALL
		SELECT r.rolname, c.relname, a.privilege_type, string_agg(att.attname, ' ' ORDER BY att.attnum)
		  FROM pg_attribute att JOIN pg_class c ON c.oid = att.attrelid,
		       aclexplode(att.attacl) a JOIN pg_roles r ON r.oid = a.grantee
		 WHERE r.rolname LIKE 'stagedrain\_%'
		 GROUP BY 1, 2, 3 ORDER BY 1, 2, 3")
	columns=$(psql -X -qAt -d "$(pg_url $db)" -c "SELECT column_name FROM information_schema.columns
		WHERE table_name = 'staged_jobs' AND table_schema = 'public' ORDER BY ordinal_position")
	sql -c "DROP DATABASE $db WITH (FORCE)"
	drop_new_roles
	for c in $columns; do
		grep -qF "| \`$c\` |" docs/staging.md || fail "docs/staging.md's table of staged_jobs lacks the column $c"
	done
	[ -n "$grants" ] || { fail "sql/roles.sql granted nothing"; return; }
	while IFS=$'\t' read -r role obj priv cols; do
		row=$(grep -E "^\| \`$role\` \|" docs/security.md || true)
		ok=
		while IFS= read -r clause; do
			if ! grep -qF "\`$priv\`" <<<"$clause" || ! grep -qF "\`$obj\`" <<<"$clause"; then
				continue
			fi
			ok=1
			for c in $cols; do grep -qF "\`$c\`" <<<"$clause" || ok=; done
			[ -z "$ok" ] || break
		done < <(tr ';' '\n' <<<"$row")
		[ -n "$ok" ] || fail "docs/security.md's roles table lacks $role: $priv on $obj${cols:+ ($cols)}"
	done <<<"$grants"
}

# slugs FILE: the anchors of its headings, as GitHub makes them.
slugs() {
	awk '/^[ \t]*```/ { f = !f } !f && /^#+ / { sub(/^#+ /, ""); print }' "$1" |
		tr '[:upper:]' '[:lower:]' | sed -e 's/[^a-z0-9 _-]//g' -e 's/ /-/g'
}

# Every relative link of the README and the pages names a file that exists
# and, with #anchor, a heading in it.
check_links() {
	local page link path anchor target
	# DOC_PAGES="docs/a.md docs/b.md": only those pages (a quick look while writing them).
for page in ${DOC_PAGES:-README.md docs/*.md clients/*/README.md}; do
		while IFS= read -r link; do
			path=${link%%#*} anchor=
			[ "$path" = "$link" ] || anchor=${link#*#}
			target=$page
			[ -z "$path" ] || target=$(realpath -m --relative-to=. "$(dirname "$page")/$path")
			if [ ! -e "$target" ]; then
				fail "$page links to $link: no such file"
			elif [ -n "$anchor" ] && [[ $target == *.md ]] && ! slugs "$target" | grep -xF -- "$anchor" >/dev/null; then
				fail "$page links to $link: no such heading"
			fi
		done < <(grep -oE '\]\([^)#[:space:]]*(#[^)[:space:]]*)?\)' "$page" | sed -E 's/^\]\((.*)\)$/\1/' | grep -v '^[a-z]*://')
	done
}

# The introduction names every format the relay writes.
check_intro() {
	local intro f
	intro=$(awk '/^## / { exit } { print }' README.md)
	for f in Sidekiq Resque ActiveJob Celery Laravel BullMQ; do
		grep -qw "$f" <<<"$intro" || fail "README.md's introduction does not name $f"
	done
}

n=0
# DOC_PAGES="docs/a.md docs/b.md": only those pages (a quick look while writing them).
for page in ${DOC_PAGES:-README.md docs/*.md clients/*/README.md}; do
	n=$((n + 1))
	run_page "$page" "$n"
done
check_settings
check_schema
check_intro
check_links
echo "doc_test: $passed pages ran as written, $failed failed"
[ "$failed" = 0 ]
