# Shared by hack/*.sh: paths of the local control plane.
# shellcheck shell=bash
CSC_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOCAL_DIR="${CSC_LOCAL_DIR:-$CSC_ROOT/.local}"
PID_DIR="$LOCAL_DIR/pids"
LOG_DIR="$LOCAL_DIR/logs"
CMD_DIR="$LOCAL_DIR/cmd"

log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# pid_alive NAME: true if the recorded process of component NAME still runs.
pid_alive() {
	local f="$PID_DIR/$1.pid"
	[ -f "$f" ] || return 1
	local pid
	pid="$(cat "$f")"
	kill -0 "$pid" 2>/dev/null || return 1
	# Guard against PID reuse: the process must still be ours. While it execs
	# (setsid -> nohup -> bash -> binary) its cmdline can read empty: that is ours.
	local cmdline
	cmdline="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" || return 1
	[ -z "$cmdline" ] && return 0
	case "$cmdline" in *"$LOCAL_DIR"*) return 0 ;; esac
	return 1
}

# start_component NAME: run $CMD_DIR/NAME.sh detached, log to $LOG_DIR/NAME.log.
start_component() {
	local name="$1"
	setsid nohup bash "$CMD_DIR/$name.sh" >>"$LOG_DIR/$name.log" 2>&1 </dev/null &
	echo $! >"$PID_DIR/$name.pid"
}

# stop_component NAME: TERM, then KILL after 10 s.
stop_component() {
	local name="$1" f="$PID_DIR/$1.pid" pid
	[ -f "$f" ] || return 0
	pid="$(cat "$f")"
	if pid_alive "$name"; then
		kill -TERM "$pid" 2>/dev/null || true
		for _ in $(seq 1 100); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$f"
}

fail_component() {
	local name="$1" why="$2"
	echo "local-up: $name failed to start: $why" >&2
	echo "---- last 30 lines of $LOG_DIR/$name.log ----" >&2
	tail -n 30 "$LOG_DIR/$name.log" >&2 || true
	exit 1
}
