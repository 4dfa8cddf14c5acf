#!/usr/bin/env bash
# kcat (librdkafka) against one agent, for the compatibility matrix.
# Prints one line per capability:
#   COMPAT {"cap":"...","status":"pass|fail|n/a","detail":"...",...}
# The runner checks the claims (topic, produced, codec, group, committed,
# idempotent) against the agent. Topics are auto-created by the produce
# (one partition), as a kcat user's would be.
#
# usage: kcat.sh --bootstrap HOST:PORT --prefix P --caps c1,c2 --count N [--timeout-s S]
set -uo pipefail

bootstrap= prefix= caps= count=1000 timeout_s=60
while [ $# -gt 0 ]; do
	case "$1" in
	--bootstrap) bootstrap=$2; shift 2 ;;
	--prefix) prefix=$2; shift 2 ;;
	--caps) caps=$2; shift 2 ;;
	--count) count=$2; shift 2 ;;
	--timeout-s) timeout_s=$2; shift 2 ;;
	*) echo "kcat.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
[ -n "$bootstrap" ] && [ -n "$prefix" ] && [ -n "$caps" ] || { echo "kcat.sh: --bootstrap, --prefix and --caps are required" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# json_str quotes $1 as a JSON string.
json_str() {
	local s=${1//\\/\\\\}
	s=${s//\"/\\\"}
	s=${s//$'\n'/ }
	s=${s//$'\t'/ }
	printf '"%s"' "$s"
}

# result CAP STATUS DETAIL [extra JSON fields, each ',"k":v']
result() {
	printf 'COMPAT {"cap":"%s","status":"%s","detail":%s%s}\n' "$1" "$2" "$(json_str "$3")" "${4:-}"
}

wants() { [[ ",$caps," == *",$1,"* ]]; }

# kc runs kcat with a bound on its run time; librdkafka retries some
# errors forever. Its stderr goes to $work/err.
kc() {
	timeout "$timeout_s" kcat -b "$bootstrap" -m 10 "$@" 2>"$work/err"
}

# errtail prints the last stderr lines of the previous kc.
errtail() { tail -n 3 "$work/err" | tr '\n' ' '; }

# messages N TAG writes N key:value lines, ten keys, values numbered.
messages() {
	awk -v n="$1" -v tag="$2" 'BEGIN { for (i = 0; i < n; i++) printf "k%02d:%s-%06d-%s\n", i % 10, tag, i, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" }'
}

# roundtrip CAP TOPIC EXTRA...: produce $count messages with the extra
# producer flags, read the topic back and compare, then print the result
# with the claims the runner checks.
roundtrip() {
	local cap=$1 topic=$2 claims=$3
	shift 3
	messages "$count" "$cap" >"$work/in"
	if ! kc -P -t "$topic" -K: -X acks=all -l "$@" "$work/in"; then
		result "$cap" fail "produce: $(errtail)"
		return 1
	fi
	if ! kc -C -t "$topic" -o beginning -e -X fetch.wait.max.ms=20 -f '%k:%s\n' >"$work/out"; then
		result "$cap" fail "consume: $(errtail)"
		return 1
	fi
	if ! cmp -s "$work/in" "$work/out"; then
		result "$cap" fail "read back $(wc -l <"$work/out") of $count messages, or not in produce order"
		return 1
	fi
	result "$cap" pass "$count messages produced and read back in order" ",\"topic\":\"$topic\",\"produced\":$count$claims"
}

version=$(kcat -V 2>&1 | sed -n 's/^Version \([^ ]*\) .*librdkafka \([^ ]*\) .*/\1 (librdkafka \2)/p')
printf 'COMPAT {"client":"kcat","version":%s}\n' "$(json_str "$version")"

base="$prefix-kcat"
if wants produce || wants consume; then
	if roundtrip produce "$base" ""; then
		# The metadata listing a kcat user checks first.
		if kc -L -J -t "$base" >"$work/md" && grep -q "\"topic\":\"$base\"" "$work/md"; then
			wants consume && result consume pass "read $count messages from the beginning to the end (-o beginning -e)"
		else
			wants consume && result consume fail "kcat -L -t $base: $(errtail)"
		fi
	else
		wants consume && result consume fail "produce failed, nothing to consume"
	fi
fi

for codec in gzip snappy lz4 zstd; do
	wants "$codec" || continue
	roundtrip "$codec" "$base-$codec" ",\"codec\":\"$codec\"" -z "$codec" -X "compression.codec=$codec"
done

if wants groups || wants offset-commit; then
	topic="$base-group" group="$base-g"
	if messages "$count" group >"$work/in" && kc -P -t "$topic" -K: -X acks=all -l "$work/in"; then
		# The balanced consumer joins, consumes to the end, and commits
		# what it stored when it leaves.
		if kc -G "$group" -e -X auto.offset.reset=earliest -X fetch.wait.max.ms=20 -f '%k:%s\n' "$topic" >"$work/out"; then
			if cmp -s "$work/in" "$work/out"; then
				wants groups && result groups pass "balanced consumer (-G) joined $group and read $count messages" ",\"topic\":\"$topic\",\"produced\":$count"
				wants offset-commit && result offset-commit pass "committed on leaving the group" ",\"topic\":\"$topic\",\"group\":\"$group\",\"committed\":$count"
			else
				wants groups && result groups fail "group consumer read $(wc -l <"$work/out") of $count messages, or out of order"
				wants offset-commit && result offset-commit fail "group consumer did not read everything"
			fi
		else
			wants groups && result groups fail "kcat -G: $(errtail)"
			wants offset-commit && result offset-commit fail "kcat -G: $(errtail)"
		fi
	else
		wants groups && result groups fail "produce: $(errtail)"
		wants offset-commit && result offset-commit fail "produce: $(errtail)"
	fi
fi

if wants idempotence; then
	roundtrip idempotence "$base-idem" ",\"idempotent\":true" -X enable.idempotence=true
fi
if wants transactions; then
	# With transactional.id set, kcat runs the whole produce as one
	# transaction and commits it at the end; read_committed must then
	# see all of it.
	topic="$base-txn"
	messages "$count" txn >"$work/in"
	if ! kc -P -t "$topic" -K: -X acks=all -X "transactional.id=$base-tx" -l "$work/in"; then
		result transactions fail "transactional produce: $(errtail)"
	elif ! kc -C -t "$topic" -o beginning -e -X isolation.level=read_committed -X fetch.wait.max.ms=20 -f '%k:%s\n' >"$work/out"; then
		result transactions fail "read_committed consume: $(errtail)"
	elif ! cmp -s "$work/in" "$work/out"; then
		result transactions fail "read_committed read $(wc -l <"$work/out") of $count committed messages"
	else
		result transactions pass "$count messages in one committed transaction, read back read_committed" ",\"topic\":\"$topic\",\"txn_committed\":$count"
	fi
fi
wants admin && result admin n/a "kcat has no admin operations beyond metadata (-L), which the consume cell checks"
exit 0
