#!/usr/bin/env bash
# The HTTP port of an agent with security on (SCRAM logins, an admin user),
# probed from the outside: schemathesis generates requests from the REST
# API's own OpenAPI document (GET /v1/openapi.json) and sends them
#   - logged in as the admin: no answer may be a 5xx, and every answer must
#     match the document (status codes, content types, bodies, headers);
#   - without a login: every operation must answer 401 with
#     `WWW-Authenticate: Basic`, and never a 5xx;
#   - with a wrong password: 401 (or 429 where failed logins are limited).
# The paths outside the document are checked with curl: /health, /healthz
# and /metrics stay open, the console and the document itself need a login.
# Needs: python3-venv, curl; tests/security/requirements.txt (schemathesis),
# installed here into a virtual environment of its own (kept between runs).
# Bounded: each schemathesis run has --max-examples per operation (and a
# timeout of its own); the whole step takes about 20 s on 2 cores once the
# binary is built and schemathesis installed (installing it the first time
# takes half a minute more).
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
started=$(date +%s)
elapsed() { echo "$(( $(date +%s) - started ))s"; }

# The same build as 40-clients.sh: reused when it is already there.
if [ -z "${AEROSTREAM_BIN:-}" ]; then
    cargo build -p agent --bin aerostream --features fault-injection
    export AEROSTREAM_BIN="$CARGO_TARGET_DIR/debug/aerostream"
fi

venv="${AEROSTREAM_SECURITY_VENV:-$HOME/.cache/aerostream/security-venv}"
req=tests/security/requirements.txt
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
if ! cmp -s "$req" "$venv/.aerostream-requirements"; then
    echo "== pip install -r $req (into $venv)"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req"
    cp "$req" "$venv/.aerostream-requirements"
fi
echo "== schemathesis $("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("schemathesis"))') ready after $(elapsed)"

work=$(mktemp -d "${TMPDIR:-/tmp}/aerostream-security.XXXXXX")
agent=""
cleanup() {
    if [ -n "$agent" ]; then
        kill "$agent" 2>/dev/null || true
        wait "$agent" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

password=$(head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')
AEROSTREAM_ADMIN_USER="admin:$password" "$AEROSTREAM_BIN" serve --data-dir "$work/data" --shards 1 \
    --kafka-addr 127.0.0.1:0 --native-addr 127.0.0.1:0 --http-addr 127.0.0.1:0 \
    --sasl-mechanisms SCRAM-SHA-512,SCRAM-SHA-256 --cache-disk-bytes 0 >"$work/agent.log" 2>&1 &
agent=$!
http=""
for _ in $(seq 300); do
    http=$(sed -n 's/.*aerostream listening .*http=\([^ ]*\).*/\1/p' "$work/agent.log" | head -n1)
    [ -n "$http" ] && break
    kill -0 "$agent" 2>/dev/null || break
    sleep 0.2
done
if [ -z "$http" ]; then
    echo "the agent did not serve:" >&2
    tail -n 40 "$work/agent.log" >&2
    exit 1
fi
base="http://$http"
echo "== agent with SCRAM logins serving HTTP on $base after $(elapsed)"

# What lies outside the OpenAPI document.
status() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
expect() { # expect CODE WHAT CURL-ARGS...
    local want=$1 what=$2 got; shift 2
    got=$(status "$@")
    if [ "$got" != "$want" ]; then
        echo "FAILED: $what answered $got, expected $want" >&2
        exit 1
    fi
    echo "ok: $what answers $got"
}
for open in /health /healthz /metrics; do
    expect 200 "$open without a login" "$base$open"
done
expect 401 "the console without a login" "$base/aerostream/console/"
expect 401 "the console with a wrong password" -u "admin:not-$password" "$base/aerostream/console/"
expect 200 "the console logged in" -u "admin:$password" "$base/aerostream/console/"
expect 401 "the OpenAPI document without a login" "$base/v1/openapi.json"
curl -sf -u "admin:$password" -o "$work/openapi.json" "$base/v1/openapi.json"

# schemathesis, bounded per operation and in time; its hypothesis database
# stays in the temporary folder, out of the clone.
st() { # st NAME ARGS...
    local name=$1; shift
    echo "== schemathesis: $name"
    (cd "$work" && PYTHONPATH="$OLDPWD/tests/security" SCHEMATHESIS_HOOKS=aerostream_checks \
        timeout 120 "$venv/bin/st" run openapi.json --url "$base" --workers 1 --request-timeout 30 \
        --phases examples,coverage,fuzzing --warnings off "$@")
}
# Every built-in check but positive_data_acceptance: the document does not
# state the ranges the handlers enforce (a partition of -1, a limit over
# 1000, an empty topic name are schema-valid and answered 400, as they
# should be). ignored_auth needs security schemes in the document, and our
# own two checks are for the runs without a valid login.
st "logged in as the admin" --auth "admin:$password" --max-examples 100 --checks all \
    --exclude-checks positive_data_acceptance,ignored_auth,refused_without_login,refused_with_a_wrong_login
st "without a login" --max-examples 50 --checks not_a_server_error,refused_without_login
st "with a wrong password" --auth "admin:not-$password" --max-examples 3 \
    --checks not_a_server_error,refused_with_a_wrong_login

if grep -q "panicked" "$work/agent.log"; then
    echo "FAILED: the agent panicked:" >&2
    grep -A5 "panicked" "$work/agent.log" >&2
    exit 1
fi
echo "== security checks passed in $(elapsed)"
