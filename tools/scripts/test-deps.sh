#!/usr/bin/env bash
# test-deps.sh: the programs `make test` drives that no one here wrote, and
# the tools the end-to-end tests trace and cut links with. `make test` and
# .ci/run both start with it, so the two cannot need different things.
#
# Everything present: it does nothing and prints nothing. Something missing:
# as root on Debian it installs the packages (apt-get); otherwise it stops at
# once, naming the packages and the one command that installs them, so that
# a run never goes twenty minutes before finding out. With --check it only
# checks, whoever runs it.
#
# SLUICE_PYTHON names the interpreter the Python clients are checked for
# (Debian's /usr/bin/python3, which the tests use: a python3 earlier in PATH,
# from pyenv or a virtualenv, does not see Debian's python3-* packages).
set -euo pipefail

check_only=false
case "${1:-}" in
--check) check_only=true ;;
"") ;;
*)
	echo "usage: $0 [--check]" >&2
	exit 2
	;;
esac

python="${SLUICE_PYTHON:-/usr/bin/python3}"

# missing prints the Debian packages of what is not there, one a line.
missing() {
	local cmd pkg
	# command:package pairs; the tests look the commands up in PATH (ip
	# in the sbin directories too, which a user's PATH may leave out).
	for pair in kcat:kcat chromium:chromium strace:strace ip:iproute2 curl:curl; do
		cmd=${pair%%:*} pkg=${pair#*:}
		if command -v "$cmd" >/dev/null 2>&1; then continue; fi
		if [ "$cmd" = ip ] && { [ -x /usr/sbin/ip ] || [ -x /sbin/ip ]; }; then continue; fi
		echo "$pkg"
	done
	# module:package pairs, for Debian's python3.
	for pair in kafka:python3-kafka confluent_kafka:python3-confluent-kafka; do
		cmd=${pair%%:*} pkg=${pair#*:}
		"$python" -c "import $cmd" >/dev/null 2>&1 || echo "$pkg"
	done
}

mapfile -t need < <(missing)
if [ ${#need[@]} -eq 0 ]; then
	exit 0
fi

install_line="apt-get update && apt-get install -y ${need[*]}"
if $check_only || [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
	echo "make test drives programs that are not installed: ${need[*]}" >&2
	if command -v apt-get >/dev/null 2>&1; then
		echo "install them (Debian's packages) with:" >&2
		echo "  sudo sh -c '$install_line'" >&2
	else
		echo "this is not a Debian system: install the equivalents of Debian's ${need[*]} and run make test again" >&2
	fi
	exit 1
fi

echo "test-deps: installing ${need[*]}" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null

mapfile -t still < <(missing)
if [ ${#still[@]} -gt 0 ]; then
	echo "test-deps: still missing after apt-get install: ${still[*]}" >&2
	exit 1
fi
