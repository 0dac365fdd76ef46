#!/bin/sh
# A fake nvidia-cuda-mps-control for the MPS tests. Each run appends to $TESSERA_FAKE_MPS_RECORD:
#   run <args> | CUDA_VISIBLE_DEVICES=... | CUDA_MPS_PIPE_DIRECTORY=... | CUDA_MPS_LOG_DIRECTORY=...
#   stdin <command>            (one line per command read, when started without -d)
# "-d" starts a stand-in daemon (a sleep) and writes its pid to
# $CUDA_MPS_PIPE_DIRECTORY/nvidia-cuda-mps-control.pid, as the real daemon does; "quit" on stdin
# ends it and removes the pid file. TESSERA_FAKE_MPS_FAIL=<command> makes that command exit 1.
rec=${TESSERA_FAKE_MPS_RECORD:?}
echo "run $* | CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES | CUDA_MPS_PIPE_DIRECTORY=$CUDA_MPS_PIPE_DIRECTORY | CUDA_MPS_LOG_DIRECTORY=$CUDA_MPS_LOG_DIRECTORY" >> "$rec"
pidfile="$CUDA_MPS_PIPE_DIRECTORY/nvidia-cuda-mps-control.pid"
if [ "$1" = "-d" ]; then
  [ "${TESSERA_FAKE_MPS_FAIL:-}" = "-d" ] && exit 1
  sleep 60 </dev/null >/dev/null 2>&1 &
  echo $! > "$pidfile"
  exit 0
fi
status=0
while IFS= read -r line; do
  echo "stdin $line" >> "$rec"
  [ -n "${TESSERA_FAKE_MPS_FAIL:-}" ] && [ "${line%% *}" = "$TESSERA_FAKE_MPS_FAIL" ] && status=1
  if [ "$line" = "quit" ] && [ -f "$pidfile" ]; then
    kill "$(cat "$pidfile")" 2>/dev/null
    rm -f "$pidfile"
  fi
done
exit $status
