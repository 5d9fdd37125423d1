#!/usr/bin/env bash
# scripts/soak.sh [MINUTES] — the reliability soak of cadre (default 60 minutes).
#
# One `cadre serve` node on a throwaway PostgreSQL cluster answers a steady stream of
# task-protocol submissions. Each task is a lead agent that fans out four background workers
# against `cadre-bench mock-server` (latency 20 ms plus up to 200 ms of jitter). Meanwhile:
#   - one task in five is cancelled a moment after it was submitted;
#   - PostgreSQL is restarted every 5 minutes (SOAK_PG_EVERY seconds);
#   - the serve node is restarted (SIGTERM, then started again) at half time.
# Every 30 s the serve process's RSS and open descriptors and the store's task counts by
# status go to samples.csv. At the end the submissions stop, the script waits for every task
# to be terminal and checks:
#   - RSS is flat: the mean of the serve process's last 10 minutes is within 10% of its first
#     10 minutes after the restart (for runs shorter than 40 minutes: the first and last
#     quarter of the second half);
#   - no submitted task is missing from the store (0 lost records);
#   - every task is terminal;
#   - no task is mislabelled: a cancelled task was cancelled by the soak or by the SIGTERM of
#     the restart, and a task's status agrees with its end state.
# The summary goes to stdout and summary.txt; the exit code is 1 when a check fails.
#
# Environment: SOAK_DIR (work directory, default target/soak/<time>), CADRE_BIN and
# CADRE_BENCH_BIN (binaries; default: built in debug), SOAK_PG_EVERY, SOAK_SUBMIT_EVERY
# (seconds between submissions, default 2).
set -euo pipefail

MINUTES=${1:-60}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${SOAK_DIR:-$ROOT/target/soak/$(date -u +%Y%m%d-%H%M%S)}
PG_EVERY=${SOAK_PG_EVERY:-300}
SUBMIT_EVERY=${SOAK_SUBMIT_EVERY:-2}
if [ -z "${CADRE_BIN:-}" ] || [ -z "${CADRE_BENCH_BIN:-}" ]; then
    (cd "$ROOT" && cargo build -q -p cadre -p cadre-bench)
fi
mkdir -p "$OUT/bin"
OUT=$(cd "$OUT" && pwd)
# Copies, so a rebuild during the run does not change the binary the restart starts.
cp "${CADRE_BIN:-$ROOT/target/debug/cadre}" "$OUT/bin/cadre"
cp "${CADRE_BENCH_BIN:-$ROOT/target/debug/cadre-bench}" "$OUT/bin/cadre-bench"
CADRE=$OUT/bin/cadre
BENCH=$OUT/bin/cadre-bench
WS=$OUT/ws
mkdir -p "$WS/.cadre/agents"
log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$OUT/events.log"; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# --- PostgreSQL (as root it runs as the `postgres` user, like the tests' clusters) ---------
PGBIN=${CADRE_PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}
[ -x "$PGBIN/initdb" ] || { echo "soak: PostgreSQL not installed (set CADRE_PG_BIN)" >&2; exit 2; }
PGDIR=/tmp/cadre-soak-pg-$$
mkdir -p "$PGDIR/sock"
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
[ "$(id -u)" = 0 ] && chown -R postgres "$PGDIR"
PGPORT=$(free_port)
as_pg "$PGBIN/initdb" -D "$PGDIR/data" -U postgres --auth=trust -E UTF8 --locale=C -N >/dev/null
PGOPTS="-p $PGPORT -k $PGDIR/sock -c listen_addresses=127.0.0.1 -c max_connections=200"
# Started processes must not inherit fd 9 (the mock's stdin), or the mock never sees EOF.
pg_ctl() { as_pg "$PGBIN/pg_ctl" -D "$PGDIR/data" -l "$PGDIR/server.log" -o "$PGOPTS" -w -t 60 "$@" >/dev/null 9>&-; }
pg_ctl start
as_pg "$PGBIN/createdb" -h 127.0.0.1 -p "$PGPORT" -U postgres cadre
export CADRE_STORE_URL="postgres://postgres@127.0.0.1:$PGPORT/cadre"

# --- the mock provider --------------------------------------------------------------------
mkfifo "$OUT/mock.in"
"$BENCH" mock-server --variant task-bg --latency-ms 20 --jitter-ms 200 \
    <"$OUT/mock.in" >"$OUT/mock.out" 2>"$OUT/mock.err" &
MOCK_PID=$!
exec 9>"$OUT/mock.in" # keeps the mock's stdin open
for _ in $(seq 100); do grep -q '^listening ' "$OUT/mock.out" 2>/dev/null && break; sleep 0.1; done
MOCK_URL=$(sed -n 's/^listening //p' "$OUT/mock.out")
[ -n "$MOCK_URL" ] || { echo "soak: the mock server did not start" >&2; exit 2; }

cat >"$WS/.cadre/config.toml" <<EOF
model = "mock:bench"
[providers.mock]
kind = "openai"
base_url = "$MOCK_URL"
[serve]
default_agent = "lead"
max_concurrent_tasks = 64
approvals = "approve"
grace_secs = 5
EOF
cat >"$WS/.cadre/agents/lead.md" <<'EOF'
---
name: lead
description: Fans out background workers.
can_delegate: true
tools: [task, task_output]
---
Delegate the jobs you are given.
EOF
cat >"$WS/.cadre/agents/worker.md" <<'EOF'
---
name: worker
description: Does one job.
workspace: {mode: shared}
tools: [read_file]
---
Do the job.
EOF

# --- the serve node -----------------------------------------------------------------------
export CADRE_SERVE_TOKEN=soak-token
SERVE_PORT=$(free_port)
BASE=http://127.0.0.1:$SERVE_PORT
AUTH="Authorization: Bearer $CADRE_SERVE_TOKEN"
start_serve() {
    "$CADRE" --workspace "$WS" serve --addr "127.0.0.1:$SERVE_PORT" >>"$OUT/serve.log" 2>&1 9>&- &
    SERVE_PID=$!
    for _ in $(seq 300); do
        curl -sf "$BASE/.well-known/agent-card.json" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "soak: cadre serve did not start" >&2
    exit 2
}
cleanup() {
    set +e
    [ -n "${SERVE_PID:-}" ] && kill "$SERVE_PID" 2>/dev/null && wait "$SERVE_PID" 2>/dev/null
    exec 9>&-
    [ -n "${MOCK_PID:-}" ] && kill "$MOCK_PID" 2>/dev/null && wait "$MOCK_PID" 2>/dev/null
    pg_ctl -m immediate stop 2>/dev/null
    rm -rf "$PGDIR"
}
trap cleanup EXIT
start_serve
log "soak: $MINUTES min, serve pid $SERVE_PID, store $CADRE_STORE_URL, mock $MOCK_URL, out $OUT"

# --- helpers ------------------------------------------------------------------------------
# Counts of the store's tasks by status, as "pending running completed failed cancelled".
counts() {
    "$CADRE" --workspace "$WS" tasks list --json 2>/dev/null | jq -r '
        [ (map(select(.status=="pending"))|length), (map(select(.status=="running"))|length),
          (map(select(.status=="completed"))|length), (map(select(.status=="failed"))|length),
          (map(select(.status=="cancelled"))|length) ] | @tsv' 2>/dev/null || echo "- - - - -"
}
sample() {
    local t=$1 rss fds
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$SERVE_PID/status" 2>/dev/null || echo 0)
    fds=$(ls "/proc/$SERVE_PID/fd" 2>/dev/null | wc -l)
    echo "$t,$SEGMENT,$rss,$fds,$(counts | tr '\t' ',')" >>"$OUT/samples.csv"
}
submit() {
    local id=$1 code
    code=$(curl -s -o "$OUT/last-submit.json" -w '%{http_code}' "$BASE/tasks" -H "$AUTH" \
        -H 'Content-Type: application/json' \
        -d "{\"task_id\":\"$id\",\"agent_id\":\"lead\",\"input\":\"Run fanout=4 jobs.\"}" || true)
    case $code in
        2*) echo "$id" >>"$OUT/submitted.txt" ;;
        *) echo "$id $code" >>"$OUT/refused.txt" ;;
    esac
}
cancel_later() {
    local id=$1
    (sleep "0.$((RANDOM % 9 + 1))"
     curl -s -o /dev/null "$BASE/tasks/$id/cancel" -H "$AUTH" -H 'Content-Type: application/json' -d '{}' &&
        echo "$id" >>"$OUT/cancelled-by-soak.txt") &
}

# --- the run ------------------------------------------------------------------------------
echo "seconds,segment,rss_kib,fds,pending,running,completed,failed,cancelled" >"$OUT/samples.csv"
: >"$OUT/submitted.txt"
: >"$OUT/cancelled-by-soak.txt"
SEGMENT=1
START=$(date +%s)
END=$((START + MINUTES * 60))
HALF=$((START + MINUTES * 30))
NEXT_PG=$((START + PG_EVERY))
NEXT_SAMPLE=$START
RESTARTED=0
N=0
while [ "$(date +%s)" -lt "$END" ]; do
    now=$(date +%s)
    if [ "$now" -ge "$NEXT_SAMPLE" ]; then
        sample $((now - START))
        NEXT_SAMPLE=$((now + 30))
    fi
    if [ "$now" -ge "$NEXT_PG" ]; then
        log "restarting PostgreSQL"
        pg_ctl -m fast restart || log "PostgreSQL restart failed"
        NEXT_PG=$((now + PG_EVERY))
    fi
    if [ "$RESTARTED" = 0 ] && [ "$now" -ge "$HALF" ]; then
        log "restarting cadre serve (SIGTERM to $SERVE_PID)"
        "$CADRE" --workspace "$WS" tasks list --json | jq -r '.[] | select(.status=="pending" or .status=="running") | .task_id' \
            >"$OUT/live-at-restart.txt" || true
        kill -TERM "$SERVE_PID"
        rc=0; wait "$SERVE_PID" || rc=$?
        log "cadre serve exited $rc"
        SEGMENT=2
        start_serve
        log "cadre serve restarted, pid $SERVE_PID"
        RESTARTED=1
    fi
    N=$((N + 1))
    id="soak-$N"
    submit "$id"
    if [ $((RANDOM % 5)) = 0 ]; then cancel_later "$id"; fi
    sleep "$SUBMIT_EVERY"
done
log "submissions stopped after $N; waiting for every task to end"
wait_deadline=$(( $(date +%s) + 600 ))
while :; do
    read -r pending running _ <<<"$(counts)"
    [ "$pending" = 0 ] && [ "$running" = 0 ] && break
    if [ "$(date +%s)" -ge "$wait_deadline" ]; then log "tasks still live after 10 min"; break; fi
    sleep 5
done
sample $(( $(date +%s) - START ))
sleep 1 # the last cancel requests (each under a second) have been sent

# --- the checks ---------------------------------------------------------------------------
"$CADRE" --workspace "$WS" tasks list --json >"$OUT/tasks.json"
for id in $(cat "$OUT/submitted.txt"); do
    curl -s "$BASE/tasks/$id" -H "$AUTH"; echo
done >"$OUT/records.jsonl"
python3 - "$OUT" "$MINUTES" <<'EOF' | tee "$OUT/summary.txt"
import csv, json, sys
out, minutes = sys.argv[1], int(sys.argv[2])
rows = list(csv.DictReader(open(f"{out}/samples.csv")))
seg2 = [r for r in rows if r["segment"] == "2" and r["rss_kib"] not in ("", "0")]
t0 = float(seg2[0]["seconds"]) if seg2 else 0
t1 = float(seg2[-1]["seconds"]) if seg2 else 0
window = 600 if t1 - t0 >= 1200 else max((t1 - t0) / 4, 30)
first = [int(r["rss_kib"]) for r in seg2 if float(r["seconds"]) <= t0 + window]
last = [int(r["rss_kib"]) for r in seg2 if float(r["seconds"]) >= t1 - window]
mean = lambda xs: sum(xs) / len(xs) if xs else 0
drift = (mean(last) - mean(first)) / mean(first) if first else float("nan")
fds = [int(r["fds"]) for r in rows if r["fds"]]
submitted = [l.strip() for l in open(f"{out}/submitted.txt") if l.strip()]
records = {}
for line in open(f"{out}/records.jsonl"):
    line = line.strip()
    if line.startswith("{"):
        r = json.loads(line)
        if "task_id" in r:
            records[r["task_id"]] = r
lost = [i for i in submitted if i not in records]
tasks = json.load(open(f"{out}/tasks.json"))
live = [t for t in tasks if t["status"] in ("pending", "running")]
ours = {l.strip() for l in open(f"{out}/cancelled-by-soak.txt") if l.strip()}
try:
    at_restart = {l.strip() for l in open(f"{out}/live-at-restart.txt") if l.strip()}
except FileNotFoundError:
    at_restart = set()
mislabelled = []
for t in tasks:
    end = t.get("end_state")
    if end and end != t["status"] and not (t["status"] == "failed" and end.startswith("limit_reached")):
        mislabelled.append((t["task_id"], t["status"], end))
for i, r in records.items():
    if r.get("status") == "cancelled" and i not in ours:
        # A lead cancelled by neither the soak nor the restart's SIGTERM is mislabelled.
        if not any(i in x or x in i for x in at_restart) and "SIGTERM" not in json.dumps(r):
            mislabelled.append((i, "cancelled", "not cancelled by the soak"))
by = lambda s: sum(1 for t in tasks if t["status"] == s)
print(f"soak: {minutes} min, {len(rows)} samples, {len(submitted)} tasks submitted, {len(ours)} cancels sent")
print(f"store: {len(tasks)} task records: completed {by('completed')}, failed {by('failed')}, cancelled {by('cancelled')}, live {len(live)}")
print(f"serve RSS (after the restart): first {mean(first)/1024:.1f} MiB, last {mean(last)/1024:.1f} MiB, drift {drift*100:+.1f}% (window {window/60:.1f} min)")
print(f"serve RSS peak {max((int(r['rss_kib']) for r in rows), default=0)/1024:.1f} MiB; open fds min {min(fds, default=0)}, max {max(fds, default=0)}")
print(f"lost records {len(lost)}; not terminal {len(live)}; mislabelled {len(mislabelled)}")
for m in (lost[:5] + [t['task_id'] for t in live[:5]] + [str(x) for x in mislabelled[:5]]):
    print("  ", m)
ok = abs(drift) <= 0.10 and not lost and not live and not mislabelled
print("PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
EOF
